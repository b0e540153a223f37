"""Explicit matching: an attribute's forms found in text, whatever its Unicode form, case,
inflection, spacing or way of writing an amount, and only as whole words."""

import pytest

from spillage.scenarios.matching import find_form, normalise


@pytest.mark.parametrize("text, forms, expected", [
    ("Gooseneck KETTLE kosher", ("kosher",), "kosher"),
    ("ＫＯＳＨＥＲ kitchen", ("kosher",), "kosher"),                 # full-width (NFKC)
    ("GROSSE Straße", ("große strasse",), "große strasse"),         # case folding
    ("I got laid-off", ("laid off",), "laid off"),
    ("laid+off", ("laid off",), "laid off"),
    ("laid \n  off", ("laid off",), "laid off"),
    ("my ADHD, honestly.", ("adhd",), "adhd"),
    ("badhd", ("adhd",), None),
    ("adhdx", ("adhd",), None),
    ("under $130 total", ("$130",), "$130"),
    ("under $1300", ("$130",), None),
    ("jewish and kosher", ("kosher", "jewish"), "kosher"),          # first form in order wins
    ("anything at all", ("", "  "), None),                          # blank forms never match
])
def test_find_form(text, forms, expected):
    assert find_form(text, forms) == expected


def test_find_form_dashed_form_matches_spaced_text():
    assert find_form("I was laid off last week", ("laid-off",)) == "laid-off"


def test_normalise():
    assert normalise("  Don\u2019t\tKOSHER \ufb01ne\n ") == "don't kosher fine"


@pytest.mark.parametrize("text, expected", [
    ("ｐｒｅｇｎａｎｔ", "pregnant"),            # full-width
    ("Café in Zürich", "cafe in zurich"),     # diacritics
    ("ZU\u0308RICH", "zurich"),               # decomposed diacritic
    ("“quoted” — ‘fine’", "\"quoted\" - 'fine'"),
    ("København", "kobenhavn"),
    ("서울", "서울"),                           # other scripts survive intact
])
def test_normalise_unicode(text, expected):
    assert normalise(text) == expected


@pytest.mark.parametrize("text, form", [
    ("I am ｐｒｅｇｎａｎｔ", "pregnant"),
    ("we live in Zürich", "zurich"),
    ("we live in Zurich", "Zürich"),
    ("my ex-fiancé", "ex-fiance"),
    ("Crohns flare", "crohn's"),
    ("Crohn’s flare", "crohn's"),
])
def test_unicode_and_apostrophes(text, form):
    assert find_form(text, (form,)) == form


@pytest.mark.parametrize("text, form", [
    ("gooseneck kettles", "kettle"),
    ("two babies at home", "baby"),
    ("gluten-free boxes", "box"),
    ("I'm divorced", "divorce"),
    ("divorcing my husband", "divorce"),
    ("the divorces", "divorce"),
    ("she was stopped", "stop"),
    ("I'm a Republican", "republican"),
    ("we're Republicans", "republican"),
    ("type 1 diabetes", "diabetes"),
    ("student loans", "student loan"),
    ("IUDs", "iud"),
    ("got laid_off", "laid off"),
    ("got laidoff", "laid off"),
    ("16GB RAM", "16 GB RAM"),
    ("16 gb ram", "16GB RAM"),
    ("both wives", "wife"),                   # irregular, from lemminflect's lexicon
    ("she was laid off", "lay off"),
    ("our children", "child"),
    ("two Crohns flares", "crohn"),           # a word the lexicon lacks: its regular plural
])
def test_inflections_and_spacing_match(text, form):
    assert find_form(text, (form,)) == form


@pytest.mark.parametrize("text, form", [
    ("pineapple juice", "apple"),
    ("for women", "men"),
    ("an illness", "ill"),
    ("pregnancy safe", "pregnant"),           # derivation, not inflection
    ("one kettle", "kettles"),                # the text's words are never stemmed
    ("chicken coop", "co-op"),                # short words are not fused
    ("I need 2 a day", "2A"),
    ("news today", "new"),                    # lemminflect knows "new" has no plural
])
def test_whole_words_only(text, form):
    assert find_form(text, (form,)) is None


@pytest.mark.parametrize("text", [
    "$130", "$130.00", "130 dollars", "130 USD", "USD 130", "US$130", "$ 130", "130$",
    "a 130-dollar kettle", "130 bucks", "under＄130", "max $130.",
])
def test_money_forms_of_130(text):
    assert find_form(text, ("$130",)) == "$130"
    assert find_form(text, ("130 dollars",)) == "130 dollars"


@pytest.mark.parametrize("text", [
    "$1300", "$2130", "2130 dollars", "$1,130", "$130.50", "130", "kettle under 130", "130k dollars",
    "€130",
])
def test_money_forms_of_130_do_not_match(text):
    assert find_form(text, ("$130",)) is None


@pytest.mark.parametrize("text, form", [
    ("$1,200", "1200 dollars"),
    ("1200 dollars", "$1,200"),
    ("$1200.00 total", "$1,200"),
    ("owe $30k", "$30,000"),
    ("30,000 dollars", "$30k"),
    ("$1.75 readers", "$1.75"),
    ("1.750 usd", "$1.75"),
    ("14,000 dollars", "14000 dollars"),
    ("a 1,200 sq ft flat", "1200 sq ft"),
])
def test_amounts_and_numbers(text, form):
    assert find_form(text, (form,)) == form


@pytest.mark.parametrize("text, form", [
    ("$1.70", "$1.75"), ("$1.7", "$1.75"), ("$1.750001", "$1.75"),
    ("size 2130 sq ft", "130 sq ft"), ("2,130 sq ft", "130 sq ft"), ("1.130 sq ft", "130 sq ft"),
    ("ages 8.5", "ages 8"),
])
def test_numbers_never_match_inside_longer_numbers(text, form):
    assert find_form(text, (form,)) is None


def test_find_form_handles_hostile_text():
    text = ("a" * 100_000) + " kettle " + "-" * 10_000 + "laid" + " " * 5000 + "off"
    assert find_form(text, ("pregnant", "laid off")) == "laid off"
    assert find_form("\x00\ud800\U0010ffff", ("pregnant",)) is None
