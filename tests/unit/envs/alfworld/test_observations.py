"""ALFWorld observation sentences are read into room knowledge."""

from services.envs.alfworld.observations import RoomKnowledge, kind, listed_names, room_receptacles

INTRO = (
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, "
    "you see a cabinet 1, a countertop 1, a fridge 1, and a sinkbasin 1.\n\nYour task is to: put a clean "
    "apple in fridge."
)


def test_room_listing_keeps_the_intro_order():
    assert room_receptacles(INTRO) == ["cabinet 1", "countertop 1", "fridge 1", "sinkbasin 1"]


def test_lists_and_kinds():
    assert listed_names("a apple 1, a knife 2, and a mug 1") == ["apple 1", "knife 2", "mug 1"]
    assert listed_names("nothing") == []
    assert kind("sinkbasin 12") == "sinkbasin"


def test_arrive_open_take_clean_put_sequence():
    room = RoomKnowledge(room_receptacles(INTRO))
    room.observe("go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is closed.")
    assert room.location == "cabinet 1" and room.closed["cabinet 1"] and not room.searched("cabinet 1")
    room.observe("open cabinet 1", "You open the cabinet 1. The cabinet 1 is open. In it, you see a apple 1.")
    assert room.contents["cabinet 1"] == ["apple 1"] and not room.closed["cabinet 1"]
    room.observe("take apple 1 from cabinet 1", "You pick up the apple 1 from the cabinet 1.")
    assert room.holding == "apple 1" and room.contents["cabinet 1"] == []
    room.observe(
        "go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a egg 1, and a mug 2."
    )
    assert room.contents["countertop 1"] == ["egg 1", "mug 2"]
    room.observe("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1.")
    assert room.changed == {"clean": {"apple 1"}}
    room.observe("put apple 1 in/on fridge 1", "You put the apple 1 in/on the fridge 1.")
    assert room.holding is None and room.where_is("apple 1") == "fridge 1"


def test_alfworld_move_wording_is_read_too():
    room = RoomKnowledge(["desk 1"])
    room.holding = "pen 1"
    room.observe("move pen 1 to desk 1", "You move the pen 1 to the desk 1.")
    assert room.holding is None and room.contents["desk 1"] == ["pen 1"]
