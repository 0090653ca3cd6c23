"""An expert for household games that sees only what the agent sees.

Its next action is a deterministic function of the objective, the opening room description and
the (action, observation) history; it never reads hidden game state, so a policy trained to
imitate it can generalise to unseen rooms. The strategy:

1. Not holding a target: take the first target seen (outside the goal receptacle for
   pick-two); if none is known yet, search: go to the first receptacle of the room listing whose
   contents are unknown, opening it if closed.
2. Holding a target that needs cleaning/heating/cooling: go to the first sink basin / microwave /
   fridge of the listing and use it.
3. look_at_obj_in_light: with the target in hand, go to where a lamp of the asked kind was seen
   (searching on if none was) and turn it on.
4. Otherwise go to the first receptacle of the goal's kind, open it if closed, put the target in.
"""

from collections.abc import Sequence

from services.envs.alfworld.observations import RoomKnowledge, kind, room_receptacles
from services.envs.alfworld.tasks import HouseholdGoal, parse_objective

_APPLIANCE_KINDS = {
    "pick_clean_then_place": ("sinkbasin", "clean"),
    "pick_heat_then_place": ("microwave", "heat"),
    "pick_cool_then_place": ("fridge", "cool"),
}


class HouseholdExpert:
    """Call ``observe`` after every accepted action, then ``next_action`` for the next one."""

    def __init__(self, objective: str, intro: str) -> None:
        self.goal: HouseholdGoal | None = parse_objective(objective)
        self.room = RoomKnowledge(receptacles=room_receptacles(intro))

    def observe(self, action: str, observation: str) -> None:
        self.room.observe(action, observation)

    def next_action(self, admissible: Sequence[str]) -> str | None:
        """The expert's choice, or None when the objective is unknown or its choice is not admissible."""
        if self.goal is None:
            return None
        action = self._decide(self.goal, admissible)
        return action if action in admissible else None

    def _decide(self, goal: HouseholdGoal, admissible: Sequence[str]) -> str:
        room = self.room
        holding = room.holding
        if holding is None:
            found = self._known_target(goal)
            if found is None:
                return self._search()
            obj, receptacle = found
            return self._act_at(receptacle, f"take {obj} from {receptacle}", needs_open=True)
        if kind(holding) != goal.obj:
            # Not a target (the agent picked it up): put it down here if allowed, else where it came from.
            put_here = f"put {holding} in/on {room.location}"
            if put_here in admissible:
                return put_here
            origin = room.taken_from.get(holding, room.location or "")
            return self._act_at(origin, f"put {holding} in/on {origin}", needs_open=True)
        if goal.task_type == "look_at_obj_in_light":
            lamp_place = self._lamp_place(goal)
            if lamp_place is None:
                return self._search()
            lamp, receptacle = lamp_place
            return self._act_at(receptacle, f"use {lamp}", needs_open=False)
        if goal.task_type in _APPLIANCE_KINDS:
            appliance_kind, verb = _APPLIANCE_KINDS[goal.task_type]
            if holding not in room.changed.get(verb, set()):
                appliance = self._first_of_kind(appliance_kind)
                if appliance is None:
                    return self._search()
                return self._act_at(appliance, f"{verb} {holding} with {appliance}", needs_open=False)
        destination = self._first_of_kind(goal.recep or "")
        if destination is None:
            return self._search()
        return self._act_at(destination, f"put {holding} in/on {destination}", needs_open=True)

    def _act_at(self, receptacle: str, action: str, needs_open: bool) -> str:
        if self.room.location != receptacle:
            return f"go to {receptacle}"
        if needs_open and self.room.closed.get(receptacle, False):
            return f"open {receptacle}"
        return action

    def _search(self) -> str:
        room = self.room
        here = room.location
        if here is not None and not room.searched(here) and room.closed.get(here, False):
            return f"open {here}"
        for receptacle in room.receptacles:
            if not room.searched(receptacle) and receptacle != here:
                return f"go to {receptacle}"
        return "look"

    def _known_target(self, goal: HouseholdGoal) -> tuple[str, str] | None:
        """The target to take next: at the current location first, else in listing order."""
        room = self.room
        destination = (
            self._first_of_kind(goal.recep or "") if goal.task_type == "pick_two_obj_and_place" else None
        )
        order = sorted(room.contents, key=lambda r: (r != room.location, _index(room.receptacles, r)))
        for receptacle in order:
            if receptacle == destination:
                continue
            for obj in room.contents[receptacle]:
                if kind(obj) == goal.obj:
                    return obj, receptacle
        return None

    def _lamp_place(self, goal: HouseholdGoal) -> tuple[str, str] | None:
        for receptacle in sorted(self.room.contents, key=lambda r: _index(self.room.receptacles, r)):
            for obj in self.room.contents[receptacle]:
                if kind(obj) == goal.toggle:
                    return obj, receptacle
        return None

    def _first_of_kind(self, receptacle_kind: str) -> str | None:
        return next((r for r in self.room.receptacles if kind(r) == receptacle_kind), None)


def _index(items: list[str], item: str) -> int:
    return items.index(item) if item in items else len(items)
