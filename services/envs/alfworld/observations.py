"""Reading ALFWorld's observation texts (the sentences of its grammar) into facts the expert uses."""

import re
from dataclasses import dataclass, field

_NAME = r"([a-z]+ \d+)"
_ITEM = re.compile(r"\ban? " + _NAME)
_ROOM_LISTING = re.compile(r"Looking quickly around you, you see (.*?)\.(?:\n|$)")
_ARRIVE = re.compile(r"You arrive at (?:loc \d+\. )?" + _NAME + r"\.")
_ON = re.compile(r"On the " + _NAME + r", you see (.*?)\.(?:\s|$)")
_OPEN_WITH = re.compile(r"The " + _NAME + r" is open\. In it, you see (.*?)\.(?:\s|$)")
_CLOSED = re.compile(r"The " + _NAME + r" is closed\.")
_CLOSE = re.compile(r"You close the " + _NAME + r"\.")
_PICK = re.compile(r"You pick up the " + _NAME + r" from the " + _NAME + r"\.")
_PUT = re.compile(r"You (?:put|move) the " + _NAME + r" (?:in/on|to) the " + _NAME + r"\.")
_CHANGE = re.compile(r"You (clean|heat|cool) the " + _NAME + r" using the " + _NAME + r"\.")
_TURN_ON = re.compile(r"You turn on the " + _NAME + r"\.")


def listed_names(text: str) -> list[str]:
    """Entity names of an ALFWorld list ('a apple 1, a knife 2, and a mug 1'); 'nothing' is []."""
    return _ITEM.findall(text)


def room_receptacles(intro: str) -> list[str]:
    """Receptacles in the order the opening room description lists them."""
    match = _ROOM_LISTING.search(intro)
    return listed_names(match.group(1)) if match else []


def kind(name: str) -> str:
    """The type word of an entity name: 'sinkbasin 1' -> 'sinkbasin'."""
    return name.rsplit(" ", 1)[0]


@dataclass
class RoomKnowledge:
    """What the agent has seen so far: location, contents, open/closed state, hands, and changes."""

    receptacles: list[str]
    location: str | None = None
    holding: str | None = None
    contents: dict[str, list[str]] = field(default_factory=dict)
    closed: dict[str, bool] = field(default_factory=dict)
    changed: dict[str, set[str]] = field(default_factory=dict)  # 'clean'/'heat'/'cool' -> objects
    lamps_on: set[str] = field(default_factory=set)
    taken_from: dict[str, str] = field(default_factory=dict)

    def searched(self, receptacle: str) -> bool:
        return receptacle in self.contents

    def where_is(self, obj: str) -> str | None:
        for receptacle, items in self.contents.items():
            if obj in items:
                return receptacle
        return None

    def observe(self, action: str, observation: str) -> None:
        """Update from one accepted action and the game's answer to it."""
        if action.startswith("go to ") and "Nothing happens" not in observation:
            self.location = action.removeprefix("go to ").strip()
        for match in _ARRIVE.finditer(observation):
            self.location = match.group(1)
        for match in _CLOSED.finditer(observation):
            self.closed[match.group(1)] = True
        for pattern in (_ON, _OPEN_WITH):
            for match in pattern.finditer(observation):
                self.contents[match.group(1)] = listed_names(match.group(2))
                self.closed[match.group(1)] = False
        for match in _CLOSE.finditer(observation):
            self.closed[match.group(1)] = True
        for match in _PICK.finditer(observation):
            obj, receptacle = match.groups()
            self.holding = obj
            self.taken_from[obj] = receptacle
            if obj in self.contents.get(receptacle, []):
                self.contents[receptacle].remove(obj)
        for match in _PUT.finditer(observation):
            obj, receptacle = match.groups()
            self.holding = None
            self.contents.setdefault(receptacle, []).append(obj)
        for match in _CHANGE.finditer(observation):
            verb, obj, _ = match.groups()
            self.changed.setdefault(verb, set()).add(obj)
        for match in _TURN_ON.finditer(observation):
            self.lamps_on.add(match.group(1))
