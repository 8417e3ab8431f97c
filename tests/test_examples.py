"""The examples run and do what they say."""

import importlib.util
import pathlib

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_tape_basics_trains(capsys):
    first, last = _load("tape_basics").main(steps=120)
    assert last < 0.5 * first
    out = capsys.readouterr().out
    assert "d(x^3)/dx at 3 = 27.0, d2 = 18.0" in out
