"""A long command's steps: position, time so far and time left at the pace so far (issue 75, item 9)."""
from stackwars_ir.common.progress import Steps, planned, seconds_words, start


def _steps():
    now, said = [0.0], []
    return Steps(said.append, clock=lambda: now[0]), now, said


def test_each_step_says_its_position_and_the_time_left_from_the_kinds_seen_so_far():
    p, now, said = _steps()
    with p.planned(["capture", "files", "baseline jax", "files", "baseline jax"]):
        p.start("capture", "capturing")
        now[0] += 30
        p.start("files", "files")
        now[0] += 10
        p("files: done in 10.0 s")  # a plain line between steps: no position
        p.start("baseline jax", "jax")
        now[0] += 20
        p.start("files", "files again")
        now[0] += 12
        p.start("baseline jax", "jax again")
        now[0] += 5
        p.start("files", "one more than planned")
    assert said == [
        "[step 1 of 5, 0 s so far] capturing",  # nothing has ended: no guess
        "[step 2 of 5, 30 s so far, about 2 min left] files",  # every kind at the one step seen: 4 x 30 s
        "files: done in 10.0 s",
        "[step 3 of 5, 40 s so far, about 50 s left] jax",  # jax unseen: the mean step (20 s); files 10 s
        "[step 4 of 5, 1 min so far, about 30 s left] files again",  # files 10 s, jax 20 s
        "[step 5 of 5, 1 min 12 s so far, about 20 s left] jax again",
        "[step 6 of 6, 1 min 17 s so far, about 11 s left] one more than planned",  # files' mean: 11 s
    ]


def test_an_inner_plan_is_held_by_the_outer_one_and_none_is_left_after():
    p, now, said = _steps()
    with p.planned(["files", "files"]):
        for _ in range(2):
            with planned(p, ["files"]):  # a bench inside `why`'s rounds
                start(p, "files", "timing")
                now[0] += 4
    start(p, "files", "alone")
    assert said == ["[step 1 of 2, 0 s so far] timing", "[step 2 of 2, 4 s so far, about 4 s left] timing", "alone"]


def test_a_plain_function_or_none_takes_the_same_calls():
    said = []
    with planned(said.append, ["files"]), planned(None, ["files"]):
        start(said.append, "files", "timing")
        start(None, "files", "nothing said")
    assert said == ["timing"]


def test_durations_read_as_a_person_says_them():
    assert [seconds_words(s) for s in (0.4, 59.6, 60, 185, 3600, 4330)] == \
        ["0 s", "1 min", "1 min", "3 min 5 s", "1 h 0 min", "1 h 12 min"]
