"""Site profiles in YAML: the shipped ones, real sites' URL grammars, a user's own, and bad files."""

import json
import re
from pathlib import Path

import pytest

from audit_helpers import KETTLE, Traffic
from spillage.audit.session_audit import audit_session
from spillage.origins.grammar import SHIPPED, ProfileError, load_grammars, load_profile, path_id
from spillage.origins.knowledge import GRAMMARS, profile_for, site_profiles
from spillage.runner.cli import main

AMAZON = "https://www.amazon.com"
EBAY = "https://www.ebay.com"


@pytest.fixture(scope="module")
def sites():
    return site_profiles()


def test_shipped_profiles_are_our_two_sites_and_two_real_ones():
    assert sorted(p.name for p in SHIPPED.glob("*.yaml")) == [
        "amazon.com.yaml", "bazaar.test.yaml", "ebay.com.yaml", "shop.test.yaml"]
    assert sorted(GRAMMARS) == ["amazon.com", "bazaar.test", "ebay.com", "shop.test"]


def test_the_profiles_live_with_their_reader_and_origins_read_nothing_of_the_audit():
    """origins/ is below audit/: its grammar reads profiles shipped in its own package, none of audit's files."""
    origins = Path(load_grammars.__code__.co_filename).parent
    assert SHIPPED == origins / "profiles"
    for module in origins.glob("*.py"):
        assert not re.search(r"spillage\.audit|from \.\.audit|\baudit/", module.read_text("utf-8")), module.name


@pytest.mark.parametrize("host, site", [
    ("www.amazon.com", "amazon.com"), ("amazon.com", "amazon.com"), ("m.amazon.com", "amazon.com"),
    ("www.amazon.de", "amazon.com"), ("www.amazon.co.uk", "amazon.com"), ("completion.amazon.com", "amazon.com"),
    ("www.ebay.com", "ebay.com"), ("m.ebay.com", "ebay.com"), ("www.ebay.co.uk", "ebay.com"),
    ("ebay.de", "ebay.com"), ("autosug.ebay.com", "ebay.com"), ("shop.test", "shop.test"),
    ("bazaar.test", "bazaar.test"), ("amazon.com.evil.example", None), ("www.google.com", None),
    ("shop.test.example", None),
])
def test_hosts_find_their_site(sites, host, site):
    found = profile_for(sites, host)
    assert (found.host if found else None) == site


@pytest.mark.parametrize("site, path, field, named", [
    ("amazon.com", "/dp/B07D9CQZM6", "product_path", "B07D9CQZM6"),
    ("amazon.com", "/Fellow-Stagg-Kettle/dp/B07D9CQZM6/ref=sr_1_3", "product_path", "B07D9CQZM6"),
    ("amazon.com", "/gp/product/B07D9CQZM6", "product_path", "B07D9CQZM6"),
    ("amazon.com", "/gp/aw/d/B07D9CQZM6", "product_path", "B07D9CQZM6"),
    ("amazon.com", "/product-reviews/B07D9CQZM6", "product_path", "B07D9CQZM6"),
    ("amazon.com", "/gp/bestsellers/kitchen/289935", "section_path", "kitchen"),
    ("ebay.com", "/itm/304000000001", "product_path", "304000000001"),
    ("ebay.com", "/itm/Canon-AE-1-35mm/304000000001", "product_path", "304000000001"),
    ("ebay.com", "/b/Film-Cameras/15230/bn_1865425", "category_path", "Film-Cameras"),
])
def test_real_sites_page_paths(site, path, field, named):
    assert path_id(re.fullmatch(getattr(GRAMMARS[site], field), path)) == named


@pytest.mark.parametrize("site, path", [
    ("amazon.com", "/s"), ("amazon.com", "/s/ref=nb_sb_noss"), ("amazon.com", "/gp/aw/s/"),
    ("ebay.com", "/sch/i.html"), ("ebay.com", "/sch/Film-Cameras/15230/i.html"), ("ebay.com", "/sch/"),
])
def test_real_sites_search_paths(site, path):
    assert GRAMMARS[site].is_search(path)
    assert not GRAMMARS[site].is_search(path + "x/y")


def test_refinements_and_aspects_are_facets_labelled_by_their_values():
    amazon, ebay = GRAMMARS["amazon.com"], GRAMMARS["ebay.com"]
    assert amazon.facets({"rh": ["n:289935,p_89:Bosch|Philips"], "k": ["kettle"]}) == [
        "n:289935", "p_89:Bosch", "Philips"]
    assert [amazon.facet_label(f) for f in ("p_89:Bosch", "p_85:2470955011")] == ["Bosch", "Prime"]
    facets = ebay.facets({"_nkw": ["camera"], "Brand": ["Canon|Nikon"], "Film%20Format": ["35mm"],
                          "LH_ItemCondition": ["3000"], "LH_TitleDesc": ["0"], "rt": ["nc"], "_sop": ["15"]})
    assert facets == ["Brand=Canon", "Brand=Nikon", "Film Format=35mm", "LH_ItemCondition=3000"]
    assert [ebay.facet_label(f) for f in facets] == ["Canon", "Nikon", "35mm", "Used"]


def test_our_sites_facets_are_their_slugs():
    assert GRAMMARS["shop.test"].facets({"f": ["gooseneck", "cordless"], "k": ["x"]}) == ["gooseneck", "cordless"]
    assert GRAMMARS["bazaar.test"].facet_label("used") == "used"


# --- a capture recorded on the real sites -------------------------------------------------------


def real_site_session(tmp_path: Path) -> Path:
    """Searches with irrelevant attributes, refinements, product pages and a cart form on amazon
    and eBay, as an imported HAR would give them, and one refused plain-HTTP search."""
    t = Traffic(tmp_path / "real-sites", KETTLE)
    t.exchange("GET", "https://completion.amazon.com/api/2017/suggestions?prefix=gooseneck+ket&mid=ATVPDKIKX0DER")
    t.exchange("GET", f"{AMAZON}/s?k=gooseneck+kettle+safe+in+pregnancy&i=kitchen&ref=nb_sb_noss")
    t.exchange("GET", f"{AMAZON}/s?k=gooseneck+kettle+safe+in+pregnancy&i=kitchen"
                      "&rh=n%3A289935%2Cp_89%3AShabbat+Mode+Kitchen&s=price-asc-rank")
    t.exchange("GET", f"{AMAZON}/Fellow-Stagg-Pregnancy-Safe-Gooseneck/dp/B07D9CQZM6/ref=sr_1_3")
    t.form(f"{AMAZON}/cart/add-to-cart/ref=dp_start-bbf_1_glance", [["ASIN", "B07D9CQZM6"], ["quantity", "1"]])
    t.exchange("GET", "https://www.amazon.de/s?k=wasserkocher")
    t.exchange("GET", f"{EBAY}/sch/i.html?_nkw=kettle+for+an+unemployed+dad&_sacat=0&LH_TitleDesc=0")
    t.exchange("GET", f"{EBAY}/sch/i.html?_nkw=kettle+for+an+unemployed+dad&_sacat=20625"
                      "&Features=Sabbath%2520Mode&LH_ItemCondition=3000&_sop=15")
    t.exchange("GET", "https://www.ebay.co.uk/itm/Gooseneck-Kettle/304000000001?hash=item46")
    t.exchange("GET", "https://m.ebay.com/b/Maternity-Kettles/20625/bn_1865425")
    t.add("egress_blocked", flow="00000000-0000-4000-8000-000000000999", method="GET",
          url="http://www.amazon.com/s?k=kettle+for+my+adhd", host="www.amazon.com", port=80, background=False,
          headers=[["Host", "www.amazon.com"]], body=None, reason="not a .test host")
    return t.close()


def test_real_site_capture_audits_into_actions_and_leaks(tmp_path):
    report = audit_session(real_site_session(tmp_path))
    actions = [(a["kind"], a["what"], a["text"], a["observers"]) for a in report["actions"]]
    assert actions == [
        ("type", "search", "gooseneck kettle safe in pregnancy", ["amazon.com"]),
        ("navigate", "filter", "Home & Kitchen", ["amazon.com"]),
        ("navigate", "filter", "289935", ["amazon.com"]),
        ("navigate", "filter", "Shabbat Mode Kitchen", ["amazon.com"]),
        ("navigate", "sort", "price-asc-rank", ["amazon.com"]),
        ("navigate", "view_product", "Fellow Stagg Pregnancy Safe Gooseneck", ["amazon.com"]),
        ("submit", "add_to_cart", "B07D9CQZM6", ["amazon.com"]),
        ("navigate", "search", "wasserkocher", ["amazon.com"]),
        ("navigate", "search", "kettle for an unemployed dad", ["ebay.com"]),
        ("navigate", "filter", "20625", ["ebay.com"]),
        ("navigate", "filter", "Sabbath Mode", ["ebay.com"]),
        ("navigate", "filter", "Used", ["ebay.com"]),
        ("navigate", "sort", "15", ["ebay.com"]),
        ("navigate", "view_product", "Gooseneck Kettle", ["ebay.com"]),
        ("navigate", "filter", "Maternity-Kettles", ["ebay.com"]),
        ("navigate", "search", "kettle for my adhd", ["refused:www.amazon.com"]),
    ]
    events = {(e["category"], e["attribute"], report["actions"][e["action"] - 1]["text"]) for e in report["events"]}
    implied = [(e["attribute"], e["matched"]) for e in report["events"] if e["category"] == "B_I"]
    assert {("C_E", "pregnant", "gooseneck kettle safe in pregnancy"), ("B_I", "kosher", "Shabbat Mode Kitchen"),
            ("B_E", "pregnant", "Fellow Stagg Pregnancy Safe Gooseneck"),
            ("C_I", "laid-off", "kettle for an unemployed dad"), ("B_I", "kosher", "Sabbath Mode"),
            ("C_E", "adhd", "kettle for my adhd")} <= events
    # cues in labels (the Sabbath implies a kosher kitchen, it does not name one); no catalog, so no catalog facts
    assert implied == [("kosher", "cue:shabbat"), ("kosher", "cue:sabbath mode"), ("pregnant", "cue:maternity")]
    assert report["recoveries"]["recovered"] == 4
    # the capture never reached the scenario's shop.test: the real shop that saw most is the first party
    assert report["site"] == "shop.test" and report["first_party"] == "amazon.com"
    pregnant = next(a for a in report["recoveries"]["attributes"] if a["attribute"] == "pregnant")
    assert pregnant["parties"] == ["first-party", "third-party"]  # amazon.com, and ebay.com (B_I, maternity)


def test_a_refused_tunnel_to_a_real_site_is_still_a_navigate(tmp_path):
    t = Traffic(tmp_path / "tunnel", KETTLE)
    t.add("egress_blocked", flow="00000000-0000-4000-8000-000000000001", method="CONNECT", url="www.amazon.com:443",
          host="www.amazon.com", port=443, background=False, headers=[], body=None, reason="not a .test host")
    actions = t.actions(site_profiles())
    assert [(a.what, a.text, a.observers) for a in actions] == [
        ("navigate", "www.amazon.com", ["refused:www.amazon.com"])]


# --- a user's own profiles ----------------------------------------------------------------------

SHOP_EXAMPLE = """\
site: shop.example
hosts: ['(?:www\\.)?shop\\.example']
search_paths: [/find]
query_params: [q]
facet_params: [tag]
"""


def test_a_users_profile_folder_adds_a_site(tmp_path, capsys):
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "shop.example.yaml").write_text(SHOP_EXAMPLE)
    t = Traffic(tmp_path / "own", KETTLE)
    t.exchange("GET", "https://www.shop.example/find?q=kettle+for+pittsburgh&tag=kosher")
    session = t.close()
    unknown = audit_session(session)   # without the profile: no search or filter, but its text is still read
    assert [(a["what"], a["channel"]) for a in unknown["actions"]] == [("request", "behavioral")]
    assert {(e["category"], e["attribute"], e["place"]["where"]) for e in unknown["events"]} == {
        ("C_E", "pittsburgh", "query:q"), ("C_E", "kosher", "query:tag")}
    assert main(["audit", "--profiles", str(folder), "--no-write", "--format", "json", str(session)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(a["what"], a["text"], a["observers"]) for a in report["actions"]] == [
        ("search", "kettle for pittsburgh", ["shop.example"]), ("filter", "kosher", ["shop.example"])]
    assert {(e["category"], e["attribute"]) for e in report["events"]} == {("C_E", "pittsburgh"), ("B_E", "kosher")}


def test_a_users_profile_replaces_a_shipped_grammar_and_keeps_the_catalog(tmp_path):
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "mine.yaml").write_text("site: shop.test\nsearch_paths: [/search]\nquery_params: [term]\n")
    shop = site_profiles(None, [folder])["shop.test"]
    assert (shop.grammar.search_paths, shop.grammar.query_params) == (("/search",), ("term",))
    assert shop.products and shop.facets


@pytest.mark.parametrize("text, message", [
    ("site: a.example\ncolour: red\n", r":2: colour: unknown key"),
    ("site: a.example\nsearch_paths: /s\n", r":2: search_paths: expected a list of strings"),
    ("site: a.example\nforms: [a, b]\n", r":2: forms: expected a mapping of strings to strings"),
    ("site: a.example\nproduct_path: '/p/(\\d+'\n", r":2: product_path: bad pattern '/p/\(\\d\+'"),
    ("site: a.example\nforms:\n  ask: '/ask/(['\n", r":2: forms.ask: bad pattern"),
    ("search_paths: [/s]\n", r": site: required key is missing"),
    ("site: a.example\nsite: b.example\n", r":2: site: given twice"),
    ("site: [a\n", r":2: not valid YAML"),
    ("- site\n", r":1: expected a mapping of keys"),
    ("site: a.example\npage_products: ['<h2>(?P<label>.+)</h2>']\n", r":2: page_products: .*needs the groups"),
])
def test_bad_profile_files_are_one_line_naming_file_line_and_key(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert str(caught.value).startswith(str(path))
    assert re.search(message, str(caught.value)), str(caught.value)
    assert "\n" not in str(caught.value)


def test_audit_with_a_bad_profile_folder_is_one_line_and_exit_2(tmp_path, capsys):
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "bad.yaml").write_text("site: a.example\nquery_params: q\n")
    session = Traffic(tmp_path / "s", KETTLE).close()
    assert main(["audit", "--profiles", str(folder), "--no-write", str(session)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"spillage: {folder / 'bad.yaml'}:2: query_params: expected a list of strings"]
    assert main(["audit", "--profiles", str(tmp_path / "nowhere"), str(session)]) == 2
    assert "no such profile folder" in capsys.readouterr().err


def test_load_grammars_reads_every_yaml_of_a_folder(tmp_path):
    (tmp_path / "one.yaml").write_text("site: One.Example\n")
    assert list(load_grammars([tmp_path], shipped=False)) == ["one.example"]


def test_pages_of_a_site_we_did_not_build_label_what_can_be_chosen(sites, tmp_path):
    """A search page (gzip, as the real sites send it) labels its products and refinements; the list and the
    card markup of eBay's both label an item; a profile of one's own labels sections."""
    import gzip

    from spillage.audit.page_labels import PageLabels

    learned = PageLabels()
    amazon = (b'<div data-asin="B07D9CQZM6" data-component-type="s-search-result"><h2 aria-label="x" class="a">'
              b'<span>Fellow Stagg &amp; Kettle</span></h2></div><div data-asin="B000000002"><img></div>'
              b'<a href="/s?k=kettle&amp;rh=n%3A1%2Cp_89%3ABosch"><span class="a-size-base a-color-base">Bosch</span></a>')
    learned.learn(sites["amazon.com"], [["Content-Type", "text/html; charset=UTF-8"], ["Content-Encoding", "gzip"]],
                  gzip.compress(amazon))
    assert learned.label(sites["amazon.com"], "product", "B07D9CQZM6") == "Fellow Stagg & Kettle"
    assert learned.label(sites["amazon.com"], "product", "B000000002") is None   # no title of its own
    assert learned.label(sites["amazon.com"], "facet", "p_89:Bosch") == "Bosch"
    ebay = (b'<a class="s-item__link" href="https://www.ebay.com/itm/304000000001?hash=1"><div class="s-item__title">'
            b'<span role="heading" aria-level="3"><span class="LIGHT_HIGHLIGHT">New Listing</span>Canon AE-1</span></div></a>'
            b'<li class="s-card" data-listingid="304000000002"><div class="s-card__title"><span class="su">Nikon FM2</span>')
    learned.learn(sites["ebay.com"], [["content-type", "text/html"]], ebay)
    assert learned.label(sites["ebay.com"], "product", "304000000001") == "Canon AE-1"
    assert learned.label(sites["ebay.com"], "product", "304000000002") == "Nikon FM2"
    learned.learn(sites["amazon.com"], [["content-type", "application/json"]], amazon.replace(b"Fellow", b"Other"))
    assert learned.label(sites["amazon.com"], "product", "B07D9CQZM6") == "Fellow Stagg & Kettle"   # not a page
    (tmp_path / "mine.yaml").write_text("site: shop.example\nsection_path: '/c/([a-z-]+)'\n"
                                        "page_sections: ['<a href=\"/c/(?P<id>[a-z-]+)\"><h3>(?P<label>[^<]+)</h3>']\n")
    mine = site_profiles(profile_dirs=[tmp_path], benchmark=False)["shop.example"]
    learned.learn(mine, [["content-type", "text/html"]], b'<a href="/c/for-new-moms"><h3>For new moms</h3></a>')
    assert PageLabels.reads(mine) and not PageLabels.reads(sites["shop.test"])
    assert learned.label(mine, "section", "for-new-moms") == "For new moms"
