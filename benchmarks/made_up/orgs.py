#!/usr/bin/env python3
"""Generate a clean/dirty CSV pair (a made-up B2B contact registry) for testing
a data-cleaning tool.

Writes, in orgs/ of the folder given (`python orgs.py DIR`; default: the current one):
  clean.csv - the truth
  dirty.csv - a copy of the truth with dirt injected (same header, same shape,
              same row order, every cell a string)
  NOTES.md  - every dirt kind and every trap, counted per half
              (first half = data rows 1-1200, second half = rows 1201-2400)

Standard library only, fixed seed: reruns give byte-identical files.

Design in short
  * Rows are ordered by `created`. The second half draws ~35% of its rows from
    a pool of companies (pool B) that the first half never holds; pool B also
    brings eight cities the first half never holds.
  * Trap cells (legitimate values a careless cleaner might "fix") are never
    dirtied. `notes` and `last_contact` are never dirtied at all.
  * At most one dirt kind per cell, so every dirty cell has exactly one kind.
"""
import csv
import datetime as dt
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

SEED = 20240611
N_ROWS = 2400
HALF = N_ROWS // 2
SHARE_NEW_IN_SECOND_HALF = 0.35        # share of 2nd-half rows from pool B
#: Where the pair is written: `python orgs.py DIR` writes DIR/orgs/ (default: the current folder).
OUT_DIR = Path(sys.argv[1] if len(sys.argv) > 1 else ".") / "orgs"

HEADER = ["contact_id", "first_name", "last_name", "company", "city", "state",
          "zip", "phone", "email", "created", "last_contact", "notes", "status"]

# --------------------------------------------------------------------------
# Reference data
# --------------------------------------------------------------------------
# city -> (state, area code, zips). new=True: only pool-B companies sit there.
CITIES = {
    "Boston":         ("MA", "617", ["02108", "02110", "02116", "02210"], False),
    "Cambridge":      ("MA", "617", ["02139", "02142"], False),
    "Hartford":       ("CT", "860", ["06103", "06106"], False),
    "Bristol":        ("CT", "860", ["06010"], False),
    "Newark":         ("NJ", "973", ["07102", "07105"], False),
    "Providence":     ("RI", "401", ["02903", "02906"], False),
    "Chicago":        ("IL", "312", ["60601", "60606", "60611"], False),
    "Austin":         ("TX", "512", ["78701", "78758"], False),
    "Dallas":         ("TX", "214", ["75201", "75202"], False),
    "Irving":         ("TX", "972", ["75038", "75039", "75063"], False),
    "Houston":        ("TX", "713", ["77002", "77058"], False),
    "Dayton":         ("OH", "937", ["45402", "45424"], False),
    "Columbus":       ("OH", "614", ["43215"], False),
    "Denver":         ("CO", "303", ["80202"], False),
    "Seattle":        ("WA", "206", ["98101", "98104"], False),
    "Atlanta":        ("GA", "404", ["30303", "30309"], False),
    "San Jose":       ("CA", "408", ["95113", "95131"], False),
    # rare, real places one or two letters away from a frequent city above
    "Bristow":        ("OK", "918", ["74010"], False),   # vs Bristol
    "Irvine":         ("CA", "949", ["92618"], False),   # vs Irving
    "Layton":         ("UT", "801", ["84041"], False),   # vs Dayton
    # second half only
    "Raleigh":        ("NC", "919", ["27601", "27607"], True),
    "Nashville":      ("TN", "615", ["37203"], True),
    "Pittsburgh":     ("PA", "412", ["15222"], True),
    "Tampa":          ("FL", "813", ["33602"], True),
    "Minneapolis":    ("MN", "612", ["55402"], True),
    "Trenton":        ("NJ", "609", ["08608"], True),
    "Portland":       ("ME", "207", ["04101"], True),
    "Salt Lake City": ("UT", "801", ["84101"], True),
}
RARE_CITY_PAIRS = {"Bristow": "Bristol", "Irvine": "Irving", "Layton": "Dayton"}

# (company, city, weight, e-mail domain or None to derive one from the name)
POOL_A = [
    ("NASA", "Houston", 1.5, "nasa.gov"),
    ("IBM", "Austin", 2.0, "ibm.com"),
    ("3M", "Austin", 1.2, "mmm.com"),
    ("AT&T", "Dallas", 2.0, "att.com"),
    ("BASF", "Newark", 1.2, "basf.com"),
    ("UPS", "Atlanta", 1.5, "ups.com"),
    ("PayPal", "San Jose", 2.0, "paypal.com"),
    ("eBay Inc.", "San Jose", 1.5, "ebay.com"),
    ("LinkedIn", "Chicago", 1.5, "linkedin.com"),
    ("FedEx", "Dallas", 1.2, "fedex.com"),
    ("iRobot", "Boston", 1.0, "irobot.com"),
    ("HubSpot", "Cambridge", 1.5, "hubspot.com"),
    ("ExxonMobil", "Irving", 1.2, "exxonmobil.com"),
    # one name, three unrelated companies in three cities
    ("Summit Health", "Hartford", 1.2, "summithealthct.com"),
    ("Summit Health", "Columbus", 1.2, "summithealth-oh.org"),
    ("Summit Health", "Denver", 1.0, "summit-health.net"),
    ("Harbor Point Logistics", "Boston", 1.4, None),
    ("Beacon Street Capital", "Boston", 1.0, None),
    ("Fenway Data Systems", "Boston", 1.2, None),
    ("Charles River Biotech", "Cambridge", 1.3, None),
    ("Kendall Square Robotics", "Cambridge", 1.0, None),
    ("Connecticut Valley Insurance", "Hartford", 1.4, None),
    ("Asylum Hill Partners", "Hartford", 0.9, None),
    ("Pequabuck Tool & Die", "Bristol", 1.2, None),
    ("Bristol Precision Springs", "Bristol", 1.3, None),
    ("Federal Hill Dental Group", "Bristol", 0.9, None),
    ("Ironbound Freight Co.", "Newark", 1.1, None),
    ("Passaic Chemical Works", "Newark", 1.0, None),
    ("Narragansett Marine Supply", "Providence", 1.0, None),
    ("Atwells Avenue Foods", "Providence", 0.9, None),
    ("Lakeshore Media Group", "Chicago", 1.3, None),
    ("Prairie State Bancorp", "Chicago", 1.2, None),
    ("Wacker Drive Consulting", "Chicago", 1.0, None),
    ("Bluebonnet Software", "Austin", 1.3, None),
    ("Live Oak Energy", "Austin", 1.0, None),
    ("Trinity River Realty", "Dallas", 1.0, None),
    ("Lone Star Staffing", "Dallas", 1.2, None),
    ("Las Colinas Medical Supply", "Irving", 1.3, None),
    ("Valley Ranch Analytics", "Irving", 1.1, None),
    ("Bayou City Petroleum", "Houston", 1.2, None),
    ("Gulf Coast Fabrication", "Houston", 1.0, None),
    ("Miami Valley Tooling", "Dayton", 1.3, None),
    ("Gem City Printing", "Dayton", 1.1, None),
    ("Wright Flyer Aviation Parts", "Dayton", 1.2, None),
    ("Buckeye Industrial Supply", "Columbus", 1.2, None),
    ("Scioto Mile Advisors", "Columbus", 0.9, None),
    ("Front Range Outfitters", "Denver", 1.1, None),
    ("Mile High Roofing", "Denver", 1.0, None),
    ("Puget Sound Analytics", "Seattle", 1.3, None),
    ("Cascade Coffee Roasters", "Seattle", 1.0, None),
    ("Rainier Cloud Services", "Seattle", 1.2, None),
    ("Peachtree Payments", "Atlanta", 1.3, None),
    ("Magnolia Hospitality Group", "Atlanta", 1.0, None),
    ("Almaden Semiconductor", "San Jose", 1.2, None),
    ("Coyote Creek Networks", "San Jose", 1.0, None),
    # the only companies in the rare trap cities, hence few rows
    ("Red Fork Pipe Supply", "Bristow", 0.45, None),
    ("Pacific Crest Diagnostics", "Irvine", 0.45, None),
    ("Wasatch Freight Lines", "Layton", 0.45, None),
]

POOL_B = [   # companies that first appear in the second half
    ("KPMG", "Pittsburgh", 1.5, "kpmg.com"),
    ("SAP SE", "Atlanta", 1.5, "sap.com"),
    ("SAS Institute", "Raleigh", 1.3, "sas.com"),
    ("HCA Healthcare", "Nashville", 1.3, "hcahealthcare.com"),
    ("PNC Bank", "Pittsburgh", 1.2, "pnc.com"),
    ("IDEXX Laboratories", "Portland", 1.0, "idexx.com"),
    ("DocuSign", "Seattle", 1.3, "docusign.com"),
    ("JPMorgan Chase", "Tampa", 1.5, "jpmchase.com"),
    ("LabCorp", "Raleigh", 1.1, "labcorp.com"),
    ("McKinsey & Company", "Boston", 1.0, "mckinsey.com"),
    ("Oak City Software", "Raleigh", 1.0, None),
    ("Triangle Research Partners", "Raleigh", 0.9, None),
    ("Music Row Productions", "Nashville", 1.0, None),
    ("Cumberland Healthcare Staffing", "Nashville", 1.1, None),
    ("Three Rivers Steel Fabricators", "Pittsburgh", 1.1, None),
    ("Allegheny Robotics", "Pittsburgh", 1.0, None),
    ("Bayshore Marine Insurance", "Tampa", 1.0, None),
    ("Gasparilla Events Co.", "Tampa", 0.8, None),
    ("North Star Grain Co.", "Minneapolis", 1.1, None),
    ("Mill City Analytics", "Minneapolis", 1.2, None),
    ("Lake Harriet Design", "Minneapolis", 0.8, None),
    ("Delaware Valley Utilities", "Trenton", 1.0, None),
    ("Capital City Pharma", "Trenton", 1.0, None),
    ("Casco Bay Seafood", "Portland", 0.9, None),
    ("Old Port Outfitters", "Portland", 0.8, None),
    ("Beehive Logistics", "Salt Lake City", 1.1, None),
    ("Great Salt Software", "Salt Lake City", 1.0, None),
    ("Back Bay Ventures", "Boston", 0.9, None),
    ("Fulton Market Logistics", "Chicago", 1.0, None),
    ("Rainey Street Labs", "Austin", 0.9, None),
]

ABBREV_COMPANIES = {"NASA", "IBM", "3M", "AT&T", "BASF", "UPS", "KPMG", "SAP SE",
                    "SAS Institute", "HCA Healthcare", "PNC Bank", "IDEXX Laboratories"}
INNER_CAPS_COMPANIES = {"PayPal", "eBay Inc.", "LinkedIn", "FedEx", "iRobot", "HubSpot",
                        "ExxonMobil", "DocuSign", "JPMorgan Chase", "LabCorp",
                        "McKinsey & Company"}
SHARED_NAME = "Summit Health"

FIRST_NAMES = [
    "James", "Mary", "Robert", "Patricia", "John", "Jennifer", "Michael", "Linda",
    "David", "Elizabeth", "William", "Barbara", "Richard", "Susan", "Joseph", "Jessica",
    "Thomas", "Sarah", "Charles", "Karen", "Christopher", "Lisa", "Daniel", "Nancy",
    "Matthew", "Betty", "Anthony", "Sandra", "Mark", "Margaret", "Steven", "Ashley",
    "Paul", "Kimberly", "Andrew", "Emily", "Joshua", "Donna", "Kevin", "Michelle",
    "Brian", "Carol", "George", "Amanda", "Timothy", "Melissa", "Ronald", "Deborah",
    "Jason", "Stephanie", "Ryan", "Rebecca", "Jacob", "Laura", "Gary", "Sharon",
    "Nicholas", "Cynthia", "Eric", "Kathleen", "Priya", "Wei", "Hiroshi", "Fatima",
    "Carlos", "Sofia", "Omar", "Ingrid", "Raj", "Mei",
    # internal capitals: traps
    "JoAnn", "LaToya", "DeAndre", "McKenzie",
]
TRAP_FIRST = {"JoAnn", "LaToya", "DeAndre", "McKenzie"}

LAST_NAMES = [
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis",
    "Rodriguez", "Martinez", "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson",
    "Thomas", "Taylor", "Moore", "Jackson", "Martin", "Lee", "Perez", "Thompson",
    "White", "Harris", "Sanchez", "Clark", "Ramirez", "Lewis", "Robinson", "Walker",
    "Young", "Allen", "King", "Wright", "Scott", "Torres", "Nguyen", "Hill", "Flores",
    "Green", "Adams", "Nelson", "Baker", "Hall", "Rivera", "Campbell", "Mitchell",
    "Carter", "Roberts", "Patel", "Kim", "Chen", "Schmidt", "Novak", "Kowalski",
    "Larsen", "Okafor", "Yamamoto", "Singh", "Murphy", "Cook", "Rogers", "Bennett",
    "Foster", "Hughes", "Price", "Sullivan", "Russell", "Fischer",
    # apostrophes, internal capitals, lower-case particles: traps
    "O'Brien", "McDonald", "MacLeod", "D'Angelo", "van der Berg", "De La Cruz",
    "McCarthy", "DeLuca", "O'Neill",
]
TRAP_LAST = {"O'Brien", "McDonald", "MacLeod", "D'Angelo", "van der Berg", "De La Cruz",
             "McCarthy", "DeLuca", "O'Neill"}

STATUSES = ["Active", "Dormant", "Prospect", "Churned"]
STATUS_WEIGHTS = [55, 22, 22, 1]

NOTE_SENTENCES = [
    "Met at the {event} in {city}", "Asked for pricing on the {tier} tier",
    "Prefers email over phone", "Follow up after the {q} budget review",
    "Decision maker is the {role}", "Sent proposal v{n}", "Left voicemail, no reply yet",
    "Interested in a {n}-month pilot", "Renewal due in {month}",
    "Referred by {first} {last}", "Out of office until {month}",
    "Wants a demo for the {team} team", "Budget frozen until next fiscal year",
    "Switched vendors last year", "Very responsive", "Call back Tuesday mornings",
    "Needs a security questionnaire answered before signing",
    "Contract signed, onboarding scheduled", "Spoke with assistant, will try again",
    "Moved to a new role in {team}", "Requested references from similar customers",
    "Invoice address changed", "Loves the reporting module",
]
FILL = {
    "event": ["trade show", "user conference", "regional meetup", "partner summit"],
    "tier": ["starter", "team", "enterprise"], "q": ["Q1", "Q2", "Q3", "Q4"],
    "role": ["CFO", "CTO", "VP of Operations", "head of procurement"],
    "month": ["January", "March", "May", "June", "September", "November"],
    "team": ["finance", "sales", "operations", "IT", "marketing"],
}

NULL_TOKENS = ["N/A", "null", "-", "none"]
START, END = dt.date(2019, 1, 2), dt.date(2024, 12, 30)
LAST_CONTACT_MAX = dt.date(2025, 6, 30)

rng = random.Random(SEED)


# --------------------------------------------------------------------------
# Building the truth
# --------------------------------------------------------------------------
class Company:
    def __init__(self, name, city, weight, domain, pool):
        self.name, self.city, self.weight, self.pool = name, city, weight, pool
        self.state, self.area, zips, _ = CITIES[city]
        self.zip = rng.choice(zips)
        if domain is None:
            core = name.replace(" Co.", "").replace(" Inc.", "").replace("&", "and")
            domain = "".join(ch for ch in core.lower() if ch.isalnum()) + ".com"
        self.domain = domain
        self.email_style = rng.choice(["first.last", "first.last", "flast", "firstl", "first_last"])


def local_part(text):
    return "".join(ch for ch in text.lower() if ch.isalpha())


def make_email(first, last, company, taken):
    f, l = local_part(first), local_part(last)
    base = {"first.last": f"{f}.{l}", "flast": f"{f[0]}{l}",
            "firstl": f"{f}{l[0]}", "first_last": f"{f}_{l}"}[company.email_style]
    address, k = f"{base}@{company.domain}", 2
    while address in taken:
        address, k = f"{base}{k}@{company.domain}", k + 1
    taken.add(address)
    return address


def make_phone(area):
    exchange = rng.randint(201, 989)
    while exchange % 100 == 11 or exchange == 555:
        exchange = rng.randint(201, 989)
    return f"({area}) {exchange}-{rng.randint(0, 9999):04d}"


def make_note(city):
    """Free text of 3-25 words about a contact in `city`; ~12% empty. Some authors type two spaces after
    a full stop; some notes end with a period, some do not."""
    if rng.random() < 0.12:
        return ""
    while True:
        parts = []
        for template in rng.sample(NOTE_SENTENCES, rng.choice([1, 1, 2, 2, 3])):
            text = template
            for key, options in FILL.items():
                text = text.replace("{" + key + "}", rng.choice(options))
            text = (text.replace("{city}", city)
                        .replace("{n}", str(rng.randint(2, 6)))
                        .replace("{first}", rng.choice(FIRST_NAMES))
                        .replace("{last}", rng.choice(LAST_NAMES)))
            parts.append(text)
        sep = ".  " if rng.random() < 0.35 else ". "
        note = sep.join(parts) + ("." if rng.random() < 0.6 else "")
        if 3 <= len(note.split()) <= 25:
            return note


def random_weekday(start, end):
    span = (end - start).days
    while True:
        d = start + dt.timedelta(days=rng.randint(0, span))
        if d.weekday() < 5 or rng.random() < 0.05:
            return d


def build_truth():
    pool_a = [Company(*c, pool="A") for c in POOL_A]
    pool_b = [Company(*c, pool="B") for c in POOL_B]
    created = sorted(random_weekday(START, END) for _ in range(N_ROWS))
    rows, companies, taken, next_id = [], [], set(), 101
    for i, created_on in enumerate(created):
        if i >= HALF and rng.random() < SHARE_NEW_IN_SECOND_HALF:
            pool = pool_b
        else:
            pool = pool_a
        company = rng.choices(pool, weights=[c.weight for c in pool])[0]
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        last_contact = created_on + dt.timedelta(
            days=rng.randint(0, min(900, (LAST_CONTACT_MAX - created_on).days)))
        rows.append({
            "contact_id": f"C{next_id:06d}",
            "first_name": first,
            "last_name": last,
            "company": company.name,
            "city": company.city,
            "state": company.state,
            "zip": company.zip,
            "phone": make_phone(company.area),
            "email": make_email(first, last, company, taken),
            "created": created_on.isoformat(),
            "last_contact": last_contact.strftime("%d.%m.%Y"),
            "notes": make_note(company.city),
            "status": rng.choices(STATUSES, weights=STATUS_WEIGHTS)[0],
        })
        companies.append(company)
        next_id += rng.choice([1, 1, 1, 1, 2, 3])     # deleted contacts leave gaps
    return rows, companies


# --------------------------------------------------------------------------
# Traps: legitimate values a careless cleaner might change. Never dirtied.
# --------------------------------------------------------------------------
def find_traps(rows):
    """Returns {trap kind: [(row index, column), ...]} and the protected cells."""
    traps = defaultdict(list)
    for r, row in enumerate(rows):
        if row["company"] in ABBREV_COMPANIES:
            traps["company abbreviation in capitals"].append((r, "company"))
        if row["company"] in INNER_CAPS_COMPANIES:
            traps["company with internal capitals"].append((r, "company"))
        if row["company"] == SHARED_NAME:
            traps[f"shared company name '{SHARED_NAME}' (company cell)"].append((r, "company"))
            traps[f"shared company name '{SHARED_NAME}' (city cell)"].append((r, "city"))
        if row["city"] in RARE_CITY_PAIRS:
            traps[f"rare city {row['city']} (vs frequent {RARE_CITY_PAIRS[row['city']]})"
                  ].append((r, "city"))
        if row["last_name"] in TRAP_LAST:
            traps["last name with apostrophe/internal capital/particle"].append((r, "last_name"))
        if row["first_name"] in TRAP_FIRST:
            traps["first name with internal capital"].append((r, "first_name"))
        if row["status"] == "Churned":
            traps["status Churned"].append((r, "status"))
        # never-dirtied columns; counted for the notes
        traps["last_contact day-first dd.mm.yyyy (all rows)"].append((r, "last_contact"))
        if int(row["last_contact"][:2]) > 12:
            traps["last_contact with day > 12"].append((r, "last_contact"))
        if "  " in row["notes"]:
            traps["notes with double space after full stop"].append((r, "notes"))
        if row["notes"].endswith("."):
            traps["notes ending with a period"].append((r, "notes"))
        if row["notes"] == "":
            traps["notes empty"].append((r, "notes"))
        if row["zip"].startswith("0"):
            traps["zip with leading zero"].append((r, "zip"))
    protected = {cell for cells in traps.values() for cell in cells}
    ordered = sorted(traps, key=lambda name: (HEADER.index(traps[name][0][1]), name))
    return {name: traps[name] for name in ordered}, protected


# --------------------------------------------------------------------------
# Dirt
# --------------------------------------------------------------------------
def make_typo(word, forbidden):
    """One letter swapped with its neighbour, dropped or doubled (never the
    first letter of any word). Retries until the result is new and not a real value."""
    for _ in range(200):
        i = rng.randint(1, len(word) - 2)
        op = rng.choice(["swap", "drop", "double"])
        if not (word[i].isalpha() and word[i - 1].isalpha()):
            continue
        if op == "swap":
            if not word[i + 1].isalpha() or word[i] == word[i + 1]:
                continue
            typo = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        elif op == "drop":
            typo = word[:i] + word[i + 1:]
        else:
            typo = word[:i] + word[i] + word[i:]
        if typo not in forbidden:
            return typo, op
    raise RuntimeError(f"no typo found for {word!r}")


def inject_dirt(clean, protected):
    dirty = [dict(row) for row in clean]
    kind_of = {}                     # (row, column) -> dirt kind
    typo_log = []                    # (half, column, clean value, typo, op, rows)

    def free(r, col):
        return (r, col) not in protected and (r, col) not in kind_of

    def put(r, col, value, kind):
        assert value != clean[r][col]
        dirty[r][col] = value
        kind_of[(r, col)] = kind

    halves = [range(0, HALF), range(HALF, N_ROWS)]
    second = halves[1]

    # 1. typos in city and company: 1-3 rows each, different typos per half
    real_values = {row[c] for row in clean for c in ("city", "company")}
    used_typos, used_sources = set(), set()
    for col, per_half in (("city", 5), ("company", 6)):
        for h, rows_in_half in enumerate(halves):
            by_value = defaultdict(list)
            for r in rows_in_half:
                if free(r, col) and len(clean[r][col]) >= 5:
                    by_value[clean[r][col]].append(r)
            candidates = sorted(v for v, rs in by_value.items()
                                if len(rs) >= 3 and (col, v) not in used_sources)
            for value in rng.sample(candidates, per_half):
                typo, op = make_typo(value, real_values | used_typos)
                targets = rng.sample(by_value[value], rng.randint(1, 3))
                for r in targets:
                    put(r, col, typo, f"{col}_typo")
                used_typos.add(typo)
                used_sources.add((col, value))
                typo_log.append((h + 1, col, value, typo, op, [r + 1 for r in sorted(targets)]))

    # 2. null tokens in email and phone
    for col, rate in (("email", 0.04), ("phone", 0.03)):
        for r in range(N_ROWS):
            if free(r, col) and rng.random() < rate:
                put(r, col, rng.choice(NULL_TOKENS), "null_token")

    # 3. phone layouts; digits-only appears in the second half only
    for r in range(N_ROWS):
        if free(r, "phone") and rng.random() < 0.42:
            p = clean[r]["phone"]                      # (617) 555-0143
            area, exch, line = p[1:4], p[6:9], p[10:]
            if r in second:
                kind = rng.choice(["phone_dots", "phone_dashes", "phone_digits_only"])
            else:
                kind = rng.choice(["phone_dots", "phone_dashes"])
            value = {"phone_dots": f"{area}.{exch}.{line}",
                     "phone_dashes": f"{area}-{exch}-{line}",
                     "phone_digits_only": f"{area}{exch}{line}"}[kind]
            put(r, "phone", value, kind)

    # 4. created written mm/dd/yyyy: second half only (a new import job)
    for r in second:
        if free(r, "created") and rng.random() < 0.30:
            d = dt.date.fromisoformat(clean[r]["created"])
            put(r, "created", d.strftime("%m/%d/%Y"), "created_mdy")

    # 5. status case slips; ALL CAPS in the second half only
    for r in range(N_ROWS):
        if free(r, "status") and rng.random() < 0.12:
            s = clean[r]["status"]
            kinds = ["status_lower", "status_lower_trailing_space"]
            if r in second:
                kinds.append("status_upper")
            kind = rng.choice(kinds)
            value = {"status_lower": s.lower(), "status_lower_trailing_space": s.lower() + " ",
                     "status_upper": s.upper()}[kind]
            put(r, "status", value, kind)

    # 6. state in lower case (~5% of rows)
    for r in range(N_ROWS):
        if free(r, "state") and rng.random() < 0.05:
            put(r, "state", clean[r]["state"].lower(), "state_lower")

    # 7. city in capitals or lower case
    for r in range(N_ROWS):
        if free(r, "city") and rng.random() < 0.04:
            c = clean[r]["city"]
            put(r, "city", c.upper() if rng.random() < 0.5 else c.lower(), "city_case")

    # 8. stray leading/trailing whitespace
    for col in ("first_name", "last_name", "company", "city", "email", "phone"):
        for r in range(N_ROWS):
            if free(r, col) and rng.random() < 0.04:
                v = clean[r][col]
                v = rng.choice([" " + v, v + " ", "  " + v, v + "  ", " " + v + " "])
                put(r, col, v, "whitespace")

    return dirty, kind_of, typo_log


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------
def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(HEADER)
        for row in rows:
            w.writerow([row[c] for c in HEADER])


def per_half(cells):
    first = sum(1 for r, _ in cells if r < HALF)
    return first, len(cells) - first


def novelty_stats(clean, companies):
    def key(i):
        return (companies[i].name, companies[i].city)
    first_cos = {key(i) for i in range(HALF)}
    second_cos = {key(i) for i in range(HALF, N_ROWS)}
    first_cities = {clean[i]["city"] for i in range(HALF)}
    second_cities = {clean[i]["city"] for i in range(HALF, N_ROWS)}
    new_cos = second_cos - first_cos
    new_rows = sum(1 for i in range(HALF, N_ROWS) if key(i) in new_cos)
    return {
        "companies_first": len(first_cos), "companies_second": len(second_cos),
        "new_companies": len(new_cos), "new_company_rows": new_rows,
        "new_cities": sorted(second_cities - first_cities),
        "cities_first": len(first_cities), "cities_second": len(second_cities),
    }


def write_notes(path, traps, kind_of, typo_log, stats, clean, dirty):
    dirt = defaultdict(list)
    for (r, col), kind in kind_of.items():
        dirt[(kind, col)].append((r, col))
    n_cells = N_ROWS * len(HEADER)
    d1, d2 = per_half(list(kind_of))
    L = []
    L.append("# orgs: clean/dirty pair (made-up B2B contact registry)\n")
    L.append(f"Generated by `../gen_orgs.py` (standard library only, seed {SEED}); "
             "rerunning it rewrites these files byte for byte.\n")
    L.append(f"- `clean.csv`: the truth. `dirty.csv`: a copy with dirt injected. "
             f"{N_ROWS} data rows x {len(HEADER)} columns, same header, same row order.")
    L.append(f"- Halves: first half = data rows 1-{HALF}, second half = rows {HALF + 1}-{N_ROWS} "
             "(1-based, header not counted). Rows are ordered by `created`.")
    L.append("- Read every cell as a string (e.g. pandas `dtype=str, keep_default_na=False`): "
             "`zip` keeps leading zeros, empty `notes` are legitimate empty strings, and "
             "`N/A`/`null`/`-`/`none` are dirt tokens.")
    L.append("- Whitespace dirt is written unquoted (QUOTE_MINIMAL), e.g. `...,active ` at "
             "a line end; do not strip on read.")
    L.append(f"- Second half novelty: {stats['new_companies']} of {stats['companies_second']} "
             f"companies in the second half ({stats['new_companies'] / stats['companies_second']:.0%}) "
             f"never occur in the first half ({stats['new_company_rows']} rows); "
             f"new cities: {', '.join(stats['new_cities'])}. "
             f"First half holds {stats['companies_first']} companies (a company = name + city) "
             f"in {stats['cities_first']} cities.\n")

    L.append("## Dirt\n")
    L.append(f"Dirty cells: {len(kind_of)} of {n_cells} ({len(kind_of) / n_cells:.1%}); "
             f"first half {d1}, second half {d2}. One dirt kind per cell. "
             "`notes`, `last_contact`, `zip`, `contact_id` carry no dirt.\n")
    L.append("| dirt kind | column | example (clean -> dirty) | first half | second half |")
    L.append("|---|---|---|---:|---:|")
    examples = {}
    for (r, col), kind in sorted(kind_of.items()):
        examples.setdefault((kind, col), r)
    for (kind, col) in sorted(dirt, key=lambda k: (k[0], HEADER.index(k[1]))):
        a, b = per_half(dirt[(kind, col)])
        r = examples[(kind, col)]
        ex = f"`{clean[r][col]!r}` -> `{dirty[r][col]!r}`"
        L.append(f"| {kind} | {col} | {ex} | {a} | {b} |")
    kind_tot = defaultdict(lambda: [0, 0])
    for (kind, col), cells in dirt.items():
        a, b = per_half(cells)
        kind_tot[kind][0] += a
        kind_tot[kind][1] += b
    L.append("\nTotals per kind (all columns):\n")
    L.append("| dirt kind | first half | second half |")
    L.append("|---|---:|---:|")
    for kind in sorted(kind_tot):
        L.append(f"| {kind} | {kind_tot[kind][0]} | {kind_tot[kind][1]} |")
    only2 = sorted(k for k, (a, b) in kind_tot.items() if a == 0 and b > 0)
    L.append(f"\nKinds that occur in the second half only: {', '.join(only2)}.\n")
    L.append("Typos (each a distinct string; the halves use different typos of different values):\n")
    L.append("| half | column | clean | typo | edit | rows (1-based) |")
    L.append("|---|---|---|---|---|---|")
    for h, col, value, typo, op, rows in typo_log:
        L.append(f"| {h} | {col} | {value} | {typo} | {op} | {', '.join(map(str, rows))} |")

    L.append("\n## Traps (legitimate; identical in clean.csv and dirty.csv)\n")
    L.append("Every cell counted here is equal in both files. A cleaner that changes "
             "any of them is wrong.\n")
    L.append("| trap | column | first half | second half |")
    L.append("|---|---|---:|---:|")
    for name, cells in traps.items():
        a, b = per_half(cells)
        L.append(f"| {name} | {cells[0][1]} | {a} | {b} |")
    L.append("")
    L.append("Details:")
    L.append(f"- Abbreviations: {', '.join(sorted(ABBREV_COMPANIES))}. "
             f"Internal capitals: {', '.join(sorted(INNER_CAPS_COMPANIES))}.")
    L.append("- Rare/frequent city pairs (all real US places): Bristow, OK vs Bristol, CT; "
             "Irvine, CA vs Irving, TX; Layton, UT vs Dayton, OH. Frequent partner rows: "
             + "; ".join(f"{c} {per_half([(r, 0) for r, row in enumerate(clean) if row['city'] == c])}"
                         for c in ("Bristol", "Irving", "Dayton")) + " (first, second half). "
             "Frequent partners may carry ordinary dirt; the rare ones never do.")
    sh = defaultdict(lambda: [0, 0])
    for r, row in enumerate(clean):
        if row["company"] == SHARED_NAME:
            sh[(row["city"], row["state"], row["zip"])][0 if r < HALF else 1] += 1
    L.append(f"- '{SHARED_NAME}' is three unrelated companies: "
             + "; ".join(f"{c}, {s} {z} ({a}/{b} rows)" for (c, s, z), (a, b) in sorted(sh.items()))
             + ". Each has its own area code and e-mail domain.")
    L.append("- Names traps: " + ", ".join(sorted(TRAP_LAST)) + "; first names "
             + ", ".join(sorted(TRAP_FIRST)) + ".")
    L.append("- `last_contact` is day-first dd.mm.yyyy on every row in both files; "
             "the rows with day <= 12 are ambiguous only to a reader that ignores the column's layout.")
    path.write_text("\n".join(L) + "\n", encoding="utf-8")
    return kind_tot



def main():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    clean, companies = build_truth()
    traps, protected = find_traps(clean)
    dirty, kind_of, typo_log = inject_dirt(clean, protected)

    # self-checks
    ids = [row["contact_id"] for row in clean]
    assert len(set(ids)) == N_ROWS
    for r in range(N_ROWS):
        for c in HEADER:
            same = clean[r][c] == dirty[r][c]
            assert same == ((r, c) not in kind_of), (r, c)
    assert not any(cell in kind_of for cell in protected)
    for name, cells in traps.items():
        a, b = per_half(cells)
        assert name.startswith("last_contact") or name.startswith("notes") or (a and b), name
    stats = novelty_stats(clean, companies)

    write_csv(OUT_DIR / "clean.csv", clean)
    write_csv(OUT_DIR / "dirty.csv", dirty)
    kind_tot = write_notes(OUT_DIR / "NOTES.md", traps, kind_of, typo_log, stats, clean, dirty)

    print(f"wrote {OUT_DIR/'clean.csv'}, {OUT_DIR/'dirty.csv'}, {OUT_DIR/'NOTES.md'}")
    print(f"dirty cells {len(kind_of)} / {N_ROWS * len(HEADER)} "
          f"({len(kind_of) / (N_ROWS * len(HEADER)):.1%}); per half {per_half(list(kind_of))}")
    print(f"second half: {stats['new_companies']}/{stats['companies_second']} companies new, "
          f"new cities {stats['new_cities']}")
    print(f"{'dirt kind':32s} {'1st':>5s} {'2nd':>5s}")
    for kind in sorted(kind_tot):
        print(f"{kind:32s} {kind_tot[kind][0]:5d} {kind_tot[kind][1]:5d}")
    print(f"{'trap':60s} {'1st':>5s} {'2nd':>5s}")
    for name, cells in traps.items():
        a, b = per_half(cells)
        print(f"{name:60s} {a:5d} {b:5d}")


if __name__ == "__main__":
    main()
