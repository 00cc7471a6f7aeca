"""Options declared where they act (`zarrfs.declared`): the declarations read `-o` items as
they say, and the composition refuses a name two of them claim."""

from __future__ import annotations

import pytest

from zarrfs.declared import Declared, Option, OptionError, OptionValues, choice, flag, parse_size, valued

pytestmark = pytest.mark.fast

SHAPE = choice("shape", {"round": 1, "square": 2}, "round", "the shape")
LOUD = flag("loud", "say it loud")
SIZE = valued("size", "size", "SIZE", parse_size, 10, "how big")
TAGS: Option[frozenset[str]] = Option("tags", "words", frozenset(), "tags, gathered",
                                      words={"red": frozenset({"red"}), "blue": frozenset({"blue"})},
                                      join=frozenset.union)
DECLARED = (SHAPE, LOUD, SIZE, TAGS)


def test_values_read_as_declared_later_ones_winning() -> None:
    values = OptionValues.parsed(DECLARED, ["shape=square", "size=1K", "size=2K", "red", "blue"])
    assert (values[SHAPE], values[SIZE], values[TAGS], values[LOUD]) == (2, 2048, {"red", "blue"}, False)
    assert SIZE in values and LOUD not in values


def test_defaults_where_not_given() -> None:
    values = OptionValues.parsed(DECLARED, [])
    assert (values[SHAPE], values[SIZE], values[TAGS]) == (1, 10, frozenset())
    assert values == OptionValues({SHAPE: 1}) and values != OptionValues({SHAPE: 2})


@pytest.mark.parametrize(("item", "message"), [
    ("shape=oval", "option shape='oval': bad value"), ("size=big", "option size='big': bad value"),
    ("loud=1", "unknown option 'loud'"), ("shape", "unknown option 'shape'"),
    ("quiet", "unknown option 'quiet'"),
])
def test_a_bad_item_is_one_error_naming_it(item: str, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        OptionValues.parsed(DECLARED, [item])


def test_a_name_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="'shape' is declared twice"):
        Declared((SHAPE, choice("shape", {"a": 0}, "a", "another shape")))
    with pytest.raises(ValueError, match="'red' is declared twice"):
        Declared((TAGS, flag("red", "a red flag")))
    assert list(Declared((SHAPE, LOUD, SHAPE))) == [SHAPE, LOUD]  # (one declaration met twice: once)


def test_forms_show_how_a_user_writes_the_option() -> None:
    assert SHAPE.forms == ("shape=round", "shape=square")
    assert LOUD.forms == ("loud",) and SIZE.forms == ("size=SIZE",) and TAGS.forms == ("red", "blue")
