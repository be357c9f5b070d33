import pytest

from pathrag_pipeline.text.names import display_name, name_key


@pytest.mark.parametrize("a, b", [
    ("The Beatles", "beatles"),
    ("“Beatles”", "Beatles"),
    ("``Beatles''", "'Beatles'"),
    ('"Beatles', "BEATLES"),
    ("«Le Monde»", "Le Monde"),
    ("(AIP)", "AIP"),
    ("[Foo]", "Foo)"),
    ("U.S.", "US"),
    ("Washington, D.C.", "Washington DC"),
    ("St. Louis", "St.Louis"),
    ("Jean-Paul Sartre", "Jean Paul  Sartre"),
    ("O'Brien", "OBrien"),
    ("AT&T", "AT & T"),
    ("Ｆｕｌｌ Ｗｉｄｔｈ", "full width"),
    ("Straße", "STRASSE"),
])
def test_same_key(a, b):
    assert name_key(a) == name_key(b)


@pytest.mark.parametrize("a, b", [
    ("Paris, France", "Paris, Texas"),
    ("Paris (Texas)", "Paris"),
    ("John Smith", "John Smithson"),
    ("Version 3.5", "Version 35"),
    ("C++", "C"),
    ("C#", "C"),
    ("Müller", "Muller"),  # accents are an alias decision, not a key one
    ("World War I", "World War II"),
])
def test_different_key(a, b):
    assert name_key(a) != name_key(b)


def test_key_details():
    assert name_key("U.S.") == "us"
    assert name_key("The Hague") == "hague"
    assert name_key("The") == "the"          # dropping "the" never empties a key
    assert name_key("...") == "..."          # nothing left: keep the casefolded form
    assert name_key("  Jan   P.  Solovej ") == "jan p solovej"
    assert name_key("the American Institute of Physics (AIP)") == "american institute of physics aip"
    assert name_key("Version 3.5") == "version 3.5"


def test_key_rejects_non_strings():
    with pytest.raises(TypeError, match="must be a string"):
        name_key(None)


def test_display_name_prefers_frequent_then_longest_then_lexicographic():
    assert display_name(["US", "U.S.", "US"]) == "US"
    assert display_name(["USA", "U.S.A"]) == "U.S.A"
    assert display_name(["Abc", "abc"]) == "Abc"
    assert display_name(["b  c", "b c", "xyz"]) == "b c"   # whitespace variants count as one form
    assert display_name(reversed(["USA", "U.S.A"])) == "U.S.A"
    with pytest.raises(ValueError):
        display_name([])
