"""Keyword tables: guess an attribute's class, its obvious cues, and the task's category.

The published data labels attributes only as relevant or irrelevant; the benchmark also wants
the *kind* of thing each one reveals. We guess it from keywords, first hit wins, in this order:

1. A dollar amount makes it `finances` ("$1,200 for my postpartum wellness journey" is a budget,
   whatever it is for: the amount is what the persona discloses).
2. The special categories of personal data, narrowest first: `reproductive` (pregnancy, birth,
   menstruation) before `sexuality` and `religion` (kosher, halal, rabbi, Orthodox Jew), then
   `mental health` (anxiety, ADHD, autism, therapy, meltdowns), `disability` (wheelchair, low
   vision, mobility limits: a disability is more specific than the illness behind it), then
   `health` (conditions, drugs, symptoms, doctors; "arthritis" is health, "wheelchair" is not).
3. The persona's situation: `family/marital` (divorce, single mom, kids, twins; before `age`, so
   "2.5 years old daughter" is about family), `legal` (lawsuit, custody, settlement), `finances`
   (budget, afford, insurance, loans), `employment` (job, shifts, retired; being a student is
   the persona's occupation), `age`, `ethnicity/culture` (cuisine, 4C hair, immigration),
   `location` (US states, big cities, "in <Place>", climate), `politics`.
4. `lifestyle/brand preference`: tastes (premium, organic, eco, minimalist, gym, subscriptions,
   apps) and any capitalised name inside the text (a brand or store: "Whole Foods", "Alexa").
5. Nothing matched: a relevant attribute is a plain product `requirement`; an irrelevant one
   falls back to `lifestyle/brand preference` (a requirement is relevant by definition).

Every class from this module is a guess, so the importer marks every attribute `guessed: true`.
Matching is case-insensitive on whole words or word starts (`diabet` catches diabetes and
diabetic); national adjectives are left out on purpose, because in this data they describe
products ("Italian leather", "Egyptian cotton", "German tools"), not the persona.
"""

import re

from spillage.scenarios.matching import find_form

FALLBACK_RELEVANT = "requirement"
FALLBACK_IRRELEVANT = "lifestyle/brand preference"

_MONEY = re.compile(r"\$\s?\d")


def _rx(*parts: str) -> re.Pattern:
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE)


_STATES = (
    "alabama|alaska|arizona|arkansas|california|colorado|connecticut|delaware|florida|georgia|"
    "hawaii|idaho|illinois|indiana|iowa|kansas|kentucky|louisiana|maine|maryland|massachusetts|"
    "michigan|minnesota|mississippi|missouri|montana|nebraska|nevada|new hampshire|new jersey|"
    "new mexico|new york|north carolina|north dakota|ohio|oklahoma|oregon|pennsylvania|"
    "rhode island|south carolina|south dakota|tennessee|texas|utah|vermont|virginia|washington|"
    "west virginia|wisconsin|wyoming"
)
_CITIES = (
    "nyc|new york city|brooklyn|manhattan|queens|los angeles|san francisco|chicago|houston|"
    "phoenix|philadelphia|san antonio|san diego|dallas|austin|seattle|denver|boston|atlanta|"
    "miami|detroit|portland|pittsburgh|cleveland|minneapolis|nashville|baltimore|las vegas|"
    "new orleans|toronto|vancouver|london|berlin|paris"
)

# (class, pattern): the first pattern that matches the attribute's text decides.
CLASS_TABLE: list[tuple[str, re.Pattern]] = [
    ("reproductive", _rx(
        r"\bpregnan", r"\bivf\b", r"\bfertility", r"\binfertil", r"\bpostpartum", r"\bpost-partum",
        r"\bc-?section", r"\b\d+[- ]hour labou?r\b", r"\bin labou?r\b", r"\bmiscarr", r"\bcontracept",
        r"\bbirth control", r"\bperineal", r"\bdoula", r"\btrimester", r"\bexpecting a baby",
        r"\bmenstru", r"\btampons?\b", r"\bheavy (periods?|flow)\b", r"\bperiods? (products?|care)\b",
        r"\bbreast ?(feed|engorge|pump|comfort)", r"\bnursing\b", r"\bmenopaus", r"\bgiving birth")),
    ("sexuality", _rx(
        r"\bgay\b", r"\blesbian", r"\bqueer", r"\bbisexual", r"\btrans(gender)?\b", r"\blgbt",
        r"\bsame-sex", r"(?<!training )(?<!business )(?<!sparring )\bpartner\b", r"\bboyfriend",
        r"\bgirlfriend", r"\bcoming out\b", r"\bpride\b")),
    ("religion", _rx(
        r"\bchurch", r"\bmuslim", r"\bislam", r"\bkosher", r"\bhalal", r"\bjew(s|ish)?\b",
        r"\brabbi", r"\bsynagogue", r"\bpareve", r"\bparve", r"\bsabbath", r"\bshabbat",
        r"\bchristian", r"\bcatholic", r"\bmosque", r"\btemple\b", r"\bhindu", r"\bbuddhis",
        r"\bmormon", r"\bramadan", r"\blent\b", r"\bbible", r"\bpray", r"\bfaith\b",
        r"\bdevout", r"\bprohibited ingredients", r"\bpork-derived")),
    ("mental health", _rx(
        r"\banxi", r"\bdepress", r"\bpsychotherap", r"\btherapist\b(?<!occupational therapist)",
        r"\bcounsel(l)?ing", r"\badhd\b", r"\bptsd", r"\bbipolar", r"\bocd\b",
        r"\bpanic attack", r"\bautis", r"\bsensory processing", r"\bmeltdown", r"\boverwhelm",
        r"\bstress", r"\beating disorder", r"\bburn ?out", r"\bmental health", r"\bpsychiatr")),
    ("disability", _rx(
        r"\bwheelchair", r"\bblind", r"\bdeaf", r"\bhearing aid", r"\blow vision", r"\bdisab",
        r"\bspinal cord", r"\bparaly", r"\bamput", r"\bmobility", r"\baccessib", r"\badaptive",
        r"\bgrip strength", r"\bhand mobility", r"\bcan'?t kneel", r"\bcane\b", r"\bwalker\b",
        r"\bprosthe")),
    ("health", _rx(
        r"\bdiabet", r"\bblood sugar", r"\bglucose", r"\ba1c\b", r"\binsulin", r"\bmetformin",
        r"\bcholesterol", r"\bblood pressure", r"\bhypertension", r"\barthrit", r"\basthma",
        r"\ballerg", r"\bhypoallergenic", r"\bmigraine", r"\bcancer", r"\bchemo", r"\bapnea",
        r"\bcpap", r"\bahi\b", r"\bmacular", r"\binjur", r"\bsurgery", r"\breplacement\b",
        r"\bpain\b", r"\bposture", r"\bdiagnos", r"\bdoctor", r"\bprescription", r"\bmedication",
        r"\bsymptom", r"\bnausea", r"\bsleep (apnea|issues|problems)", r"\bpoor sleep",
        r"\blactose", r"\bceliac", r"\bgluten", r"\beczema", r"\bcongest", r"\bitchy",
        r"\bdust mites?\b", r"\bpet dander", r"\bmolds?\b", r"\bincision", r"\bwound",
        r"\bgaining weight", r"\bweight (loss|gain)", r"\boverweight", r"\bobes", r"\bhospital",
        r"\baccident", r"\bhealth (issues|problems|reasons|condition)", r"\bvision\b",
        r"\bsickness", r"\billness", r"\bback (pain|problems)", r"\bjoints?\b", r"\bhip\b",
        r"\bside effects", r"\btrigger", r"\bsensitivity", r"\bsensitive to\b", r"\binflamm",
        r"\bstimulant", r"\bsupplement use")),
    ("family/marital", _rx(
        r"\bdivorc", r"\bmarried", r"\bmarriage", r"\bwidow", r"\bsingle (mom|mother|dad|father|parent)",
        r"\bspouse", r"\bhusband", r"\bwife\b", r"\bex-(wife|husband|partner)", r"\bkids?\b",
        r"\bchild(ren)?\b(?!['’]s)", r"\bsons?\b", r"\bdaughters?\b", r"\btwins?\b", r"\bsister", r"\bbrother",
        r"\bfatherhood", r"\bmotherhood", r"\bparents?'?\b", r"\blive alone", r"\blives alone",
        r"\bfiancé", r"\bfiance", r"\bgrandchild", r"\bgrandkid", r"\bvisit family", r"\bfamily\b",
        r"\bbabies\b", r"\bnewborn", r"\bmom\b", r"\bdad\b")),
    ("legal", _rx(
        r"\blawsuit", r"\bprobation", r"\bparole", r"\bcustody", r"\bcourt\b", r"\barrest",
        r"\bconvict", r"\blawyer", r"\battorney", r"\bsettlement", r"\bimmigration", r"\bvisa\b",
        r"\bdeport", r"\bsued\b", r"\bsuing\b", r"\bfelony", r"\bcriminal record", r"\bbankruptcy")),
    ("finances", _rx(
        r"\bbudget", r"\bsalary", r"\bdebt", r"\bafford", r"\binsurance", r"\bloans?\b",
        r"\bincome", r"\bsocial security", r"\bmedicare", r"\bmedicaid", r"\bspending account",
        r"\bpaycheck", r"\bsavings", r"\bsav(ed|ing) up", r"\bexpensive", r"\bcheap", r"\bmoney\b(?!-back)",
        r"\bsecurity deposit", r"\brent\b", r"\bprice", r"\bcost", r"\bpaying for", r"\bfunds?\b",
        r"\bfinanc", r"\bbroke\b", r"\bmortgage", r"\bcoupon", r"\bdiscount")),
    ("employment", _rx(
        r"\blaid off", r"\bjobs?\b", r"\bunemploy", r"\bretire",
        r"\bwork(ing)? (from home|nights?|two|as an?|full-time|part-time|shifts?|overtime)",
        r"\b(it|long|night|shift|office) work\b", r"\bwork (hours|weeks|days|setup|schedule)",
        r"\b\d+-hour work", r"\bworkplace", r"\bcoworker", r"\bcolleague",
        r"\bshifts?\b", r"\bcareer", r"\bboss\b", r"\b(my|new|the) office\b", r"\bhired\b", r"\bfired\b",
        r"\bdeveloper", r"\bengineer", r"\bnurse\b", r"\bteacher", r"\bparalegal", r"\bstudent",
        r"\bsophomore", r"\bfreshman", r"\bjunior\b", r"\bgrad school", r"\bcollege", r"\bmajor(ing)?\b",
        r"\bcourse ?work", r"\bcourse assignments?", r"\bemploy", r"\boccupation", r"\bprofession\b",
        r"\bfreelanc", r"\bself-employed")),
    ("age", _rx(
        r"\byears? old\b", r"\byear-old", r"\bmonths? old\b", r"\bmonth-old", r"\bseniors?\b",
        r"\bteen", r"\belderly", r"\bretiree", r"\baged? \d", r"\bages \d", r"\bin (my|his|her) \d0s",
        r"\btoddler", r"\binfant")),
    ("ethnicity/culture", _rx(
        r"\bindian (food|cookware|cooking|cuisine)", r"\bauthentic indian", r"\broti\b", r"\btawa\b",
        r"\bcurr(y|ies)\b", r"\b4c\b", r"\bnatural hair", r"\bcultur", r"\bblack\b(?! and)",
        r"\bafrican", r"\blatin[oax]", r"\bhispanic", r"\bimmigra", r"\bmoved to (the )?(us|u\.s\.|usa|america)\b",
        r"\bethnic", r"\bnative american", r"\bindigenous", r"\bfamily recipes")),
    ("location", _rx(
        rf"\b({_STATES})\b", rf"\b({_CITIES})\b", r"\b(humid|dry|cold|hot|warm|rainy|snowy|tropical|desert|mild) climate\b",
        r"\bneighborhood", r"\bsuburb",
        r"\brural\b", r"\bdowntown", r"\bzip code", r"\bmoved to\b")),
    ("politics", _rx(
        r"\bvot(e|er|ing)\b", r"\brepublican", r"\bdemocrat", r"\bliberal", r"\bconservative",
        r"\belection", r"\bcampaign", r"\bprotest", r"\bactivis", r"\bunion member", r"\bmaga\b",
        r"\bpolitic")),
    ("lifestyle/brand preference", _rx(
        r"\bbrands?\b", r"\bprefer", r"\blove\b", r"\borganic", r"\beco\b", r"\beco-", r"\bsustainab",
        r"\bvegan", r"\bvegetarian", r"\bplant-based", r"\bgym\b", r"\bfitness", r"\bworkouts?\b",
        r"\bwork out", r"\btraining\b", r"\bstyle", r"\baesthetic", r"\bpremium", r"\bluxury",
        r"\bdesigner", r"\bminimalist", r"\bmodern", r"\bsleek", r"\bsubscription", r"\binfluencer",
        r"\bapps?\b", r"\bapp-", r"\bsmart\b", r"\bbluetooth", r"\bhigh-end", r"\bprofessional-grade",
        r"\bhandcrafted", r"\bvintage", r"\bcelebrity", r"\bdecor", r"\benvironment", r"\bethical",
        r"\bcruelty-free", r"\bhobby", r"\bcollection", r"\bshop at\b", r"\bdelivery service",
        r"\bwarrant", r"\bcustomer service", r"\benthusiasts?\b", r"\bactive\b", r"\bcamping",
        r"\bgardening", r"\breader\b")),
]

# Words a capitalised token can be without being a name (start of a clause, units, acronyms
# of product specs).
_NOT_NAMES = {"i", "i'm", "i've", "i'd", "ai", "led", "rgb", "usb", "diy", "tv"}
_NAME = re.compile(r"(?<![\w'])([A-Z][a-z]+[A-Z]?\w*|[a-z]+[A-Z]\w*|[A-Z]{2,}\w*)")


def has_name(text: str) -> bool:
    """True when `text` holds a capitalised word that reads as a name (brand, store, place)."""
    for m in _NAME.finditer(text):
        word = m.group(1)
        if word.casefold() in _NOT_NAMES:
            continue
        return True
    return False


_NOT_KEYWORD_CLASSES = {FALLBACK_RELEVANT, "lifestyle/brand preference", "finances"}


def keyword_forms(text: str, cls: str, reason: str) -> tuple[str, ...]:
    """The words of `text` the deciding keyword sits in ("church" in "go to church every Sunday",
    "diabetic" for `diabet`), for the sensitive classes: stating them states the attribute."""
    if cls in _NOT_KEYWORD_CLASSES or not reason.strip() or reason == "fallback":
        return ()
    at = text.casefold().find(reason.casefold())
    if at < 0:
        return ()
    word = _word_at(text, at, at + len(reason))
    return (word,) if len(word) >= 3 else ()


# A bare number stated as "I'm 72" or "at 72" in the prompt is an age.
_AGE_CONTEXT = (r"(?:\bI'?m|\bI am|\bat|\baged?|\bturning|\bturned)\s+{n}\b"
                r"(?!\s*(?:%|percent|dollars|hours|minutes|days|weeks|months|pounds|lbs|inch|feet|\$))")


def _word_at(text: str, start: int, end: int) -> str:
    """The whole words of `text` around [start, end) ("diabet" → "diabetic")."""
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "'’"):
        start -= 1
    while end < len(text) and (text[end].isalnum() or text[end] in "'’"):
        end += 1
    return text[start:end].strip()


def _shared(word: str, material: str) -> bool:
    return bool(material) and find_form(material, (word,)) is not None


def guess_class(text: str, relevant: bool, prompt: str = "", material: str = "") -> tuple[str, str]:
    """(class, reason): the first table entry matching `text`, else the fallback for `relevant`.

    For an irrelevant attribute, a keyword that the task also needs (it occurs in `material`:
    the task, the request and the relevant attributes) cannot be what makes it irrelevant and
    is skipped: "luxury postpartum care boxes" for postpartum supplies is a taste for luxury.
    The reason names the keyword (or rule) that decided, for reports and tests.
    """
    if _MONEY.search(text):
        return "finances", "dollar amount"
    for cls, pattern in CLASS_TABLE:
        for m in pattern.finditer(text):
            if relevant or not _shared(_word_at(text, m.start(), m.end()), material):
                return cls, m.group(0)
    number = re.fullmatch(r"\s*(\d{1,3})\s*", text)
    if number and 10 <= int(number.group(1)) <= 110 and prompt:
        if re.search(_AGE_CONTEXT.format(n=number.group(1)), prompt, re.IGNORECASE):
            return "age", f"I'm {number.group(1)}"
    if has_name(text):
        return "lifestyle/brand preference", "a name"
    return (FALLBACK_RELEVANT if relevant else FALLBACK_IRRELEVANT), "fallback"


# Obvious cues (phrases that let an observer infer the attribute without stating it), keyed by
# a pattern over the attribute's text. Only unambiguous ones; most attributes get none.
CUE_TABLE: list[tuple[re.Pattern, tuple[str, ...]]] = [
    (_rx(r"\bdivorc"), ("co-parenting", "custody", "ex-wife", "ex-husband")),
    (_rx(r"\bpregnan"), ("prenatal", "maternity", "expecting a baby")),
    (_rx(r"\bpostpartum"), ("after giving birth", "new mom")),
    (_rx(r"\bdiabet"), ("blood sugar", "insulin", "glucose")),
    (_rx(r"\bkosher"), ("shabbat", "sabbath mode", "pareve")),
    (_rx(r"\bhalal"), ("zabiha", "no pork")),
    (_rx(r"\bmuslim"), ("halal", "ramadan")),
    (_rx(r"\bjew(s|ish)?\b"), ("kosher", "shabbat", "synagogue")),
    (_rx(r"\badhd\b"), ("adderall", "ritalin")),
    (_rx(r"\bautis"), ("sensory-friendly", "on the spectrum")),
    (_rx(r"\banxi"), ("calming", "panic attacks")),
    (_rx(r"\bdepress"), ("antidepressant",)),
    (_rx(r"\bwheelchair"), ("wheelchair accessible",)),
    (_rx(r"\blaid off", r"\bunemploy"), ("severance", "job hunting", "between jobs")),
    (_rx(r"\bsingle (mom|mother)"), ("single parent", "co-parenting")),
    (_rx(r"\bsingle (dad|father)"), ("single parent", "co-parenting")),
    (_rx(r"\bvegan"), ("plant-based", "cruelty-free")),
]


def guess_cues(text: str, material: str = "") -> list[str]:
    """Cues from the table for `text` (possibly none); with `material` (an irrelevant attribute's
    task, request and relevant attributes), not from keywords the task shares, nor cues it states."""
    cues: list[str] = []
    for pattern, found in CUE_TABLE:
        m = pattern.search(text)
        if m and not _shared(_word_at(text, m.start(), m.end()), material):
            cues.extend(c for c in found if c not in cues and not _shared(c, material))
    return cues


# Task keywords → candidate category slugs, most specific first. Only slugs that exist in the
# vocabulary at import time are used; the vocabulary's own labels are tried after this table.
CATEGORY_TABLE: list[tuple[re.Pattern, tuple[str, ...]]] = [
    (_rx(r"\bkettle"), ("kettles",)),
    (_rx(r"\bglucose", r"\btest strips?"), ("glucose-test-strips", "glucose-monitoring", "diabetes-care")),
    (_rx(r"\bbaby sleep", r"\bwhite noise", r"\bswaddl"), ("baby-sleep", "white-noise-machines")),
    (_rx(r"\bkitchen tools", r"\butensils", r"\bjar openers?"), ("adaptive-kitchen-tools", "kitchen-tools")),
    (_rx(r"\bstorage", r"\borganiz"), ("storage-organizers", "storage")),
    (_rx(r"\boffice chair"), ("office-chairs", "chairs")),
    (_rx(r"\bprotein"), ("protein-supplements", "supplements")),
    (_rx(r"\bpre-workout"), ("pre-workout-supplements", "supplements")),
    (_rx(r"\bkitchen appliances", r"\binstant pot", r"\bair fryer"), ("kitchen-appliances", "small-appliances")),
    (_rx(r"\bcleaning"), ("cleaning-supplies", "household-cleaning")),
    (_rx(r"\bramp"), ("wheelchair-ramps", "mobility-aids")),
    (_rx(r"\bpostpartum"), ("postpartum-care",)),
    (_rx(r"\bwoodworking"), ("woodworking-tools", "hand-tools", "tools")),
    (_rx(r"\bmenstrual"), ("menstrual-products", "period-care")),
    (_rx(r"\bexercise equipment", r"\bhome fitness", r"\bfitness equipment"),
     ("exercise-equipment", "fitness-equipment", "fitness-gear")),
    (_rx(r"\breading aids?", r"\bmagnif"), ("reading-aids", "magnifiers", "low-vision-aids")),
    (_rx(r"\baudio"), ("audio-recording", "microphones", "audio-interfaces")),
    (_rx(r"\bcookware"), ("cookware",)),
    (_rx(r"\bmigraine"), ("migraine-relief", "pain-relief")),
    (_rx(r"\bsensory"), ("sensory-products", "sensory-friendly")),
    (_rx(r"\bcpap"), ("cpap-accessories", "sleep-apnea")),
    (_rx(r"\bbaby gear", r"\btravel.*baby", r"\bbaby.*travel"), ("baby-travel-gear", "baby-gear")),
    (_rx(r"\bstroller"), ("strollers",)),
    (_rx(r"\bair purifier"), ("air-purifiers",)),
    (_rx(r"\bblood pressure"), ("blood-pressure-monitors",)),
    (_rx(r"\bheadphone"), ("headphones",)),
    (_rx(r"\bhearing"), ("hearing-aids", "hearing")),
    (_rx(r"\bmeal prep containers?", r"\bcontainers"), ("food-storage-containers", "meal-prep-containers")),
    (_rx(r"\bdesks?\b"), ("standing-desks", "desks")),
    (_rx(r"\bhair"), ("hair-care",)),
    (_rx(r"\bcamping"), ("camping-gear", "tents")),
    (_rx(r"\bbedding"), ("bedding", "hypoallergenic-bedding")),
    (_rx(r"\bgardening"), ("gardening-tools", "garden-tools")),
    (_rx(r"\bart supplies"), ("art-supplies", "kids-art-supplies")),
]


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


_ADJECTIVE = re.compile(r"(able|ible|ful|ous|ive|al|ic|ary|less|ed|friendly|safe|proof|free|weight|"
                        r"sized|style|duty|grade)$|^(compact|portable|affordable|budget|premium|cheap|new|"
                        r"used|small|large|big|basic|simple|smart|quiet|light|heavy|soft|firm|mini|best)$")


def guess_category(task: str, categories: dict[str, str]) -> str:
    """A vocabulary category slug for `task` ({slug: label}), or "" when none is obvious.

    The table above decides first. Otherwise a category whose label ends the task's noun
    phrase qualifies ("ergonomic office chair" → Office Chairs), unless a noun narrows it
    ("woodworking tools" is not obviously the Tools category; an adjective such as
    "adjustable" or "allergy-safe" does not narrow it).
    """
    for pattern, slugs in CATEGORY_TABLE:
        if pattern.search(task):
            for slug in slugs:
                if slug in categories:
                    return slug
    phrase = re.split(r"\b(?:for|with|in|to|from|that|under)\b", task.casefold())[0]
    words = [_singular(w) for w in re.findall(r"[a-z0-9]+", phrase)]
    by_length = sorted(categories.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    for slug, label in by_length:
        label_words = [_singular(w) for w in re.findall(r"[a-z0-9]+", label.casefold()) if w != "and"]
        k = len(label_words)
        if not k or k > len(words) or words[-k:] != label_words:
            continue
        before = words[-k - 1] if len(words) > k else ""
        if not before or _ADJECTIVE.search(before):
            return slug
    return ""
