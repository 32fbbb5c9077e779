"""Writes the three instructed-cleaning cases: a dirty file and its truth for patients, products, transactions.

Run: `python benchmarks/instructed/make_cases.py [OUT_DIR]` (default: this folder). Seeded: the same files
every time.

Each row starts as a clean canonical record that already satisfies every instruction in
`<case>.instructions.md`: that record is the truth row. The dirty row is the same record written the way a
messy export writes it: every field is passed through a list of realistic spellings of the SAME value (a
date in five formats, a phone in six, a boolean in eight...), picked at random per cell. Each spelling keeps
the information, so the truth is recoverable from the dirty row and the instructions alone (a perfect
cleaner reaches F1 1.0). Some spellings are the canonical one, so not every cell is dirty.

The instructions that are not row-level fixes (remove duplicates, convert to EUR, sort the file) are left
undone in the truth: the rows stay as they are, and a good agent declines them with a reason.

Every spelling an instruction names ("missing emails (empty, N/A, -, unknown, none) as null") occurs in the
dirty file, and so do the duplicates and the disorder the declined instructions speak of: `check_spoken`
fails the script loudly otherwise, so a case can never score an instruction it does not exercise. The
spellings of a missing value are dealt in turn (`Spellings`), not drawn, so each one named occurs.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import random
import re
import sys
from datetime import date, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent

FIRST_M = ["James", "Robert", "Michael", "David", "William", "Daniel", "Thomas", "Anthony", "Kevin", "Brian",
           "Jason", "Eric", "Samuel", "Henry", "Oscar"]
FIRST_F = ["Maria", "Linda", "Susan", "Karen", "Nancy", "Emily", "Laura", "Rachel", "Helen", "Sofia", "Grace",
           "Julia", "Alice", "Nora", "Diana"]
LAST = ["Smith", "Johnson", "Brown", "Lopez", "Garcia", "Miller", "Davis", "Wilson", "Taylor", "Moore",
        "Clark", "Lewis", "Walker", "Young", "Allen", "King", "Wright", "Scott", "Green", "Baker", "Adams",
        "Nelson", "Hill", "Campbell", "Mitchell", "Roberts", "Carter", "Phillips", "Evans", "Turner"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
#: (state code, full name, city, zip prefix)
PLACES = [("MA", "Massachusetts", "Boston", "021"), ("MA", "Massachusetts", "Worcester", "016"),
          ("NY", "New York", "Albany", "122"), ("NJ", "New Jersey", "Newark", "071"),
          ("CA", "California", "San Diego", "921"), ("TX", "Texas", "Austin", "787"),
          ("IL", "Illinois", "Chicago", "606"), ("WA", "Washington", "Seattle", "981"),
          ("CT", "Connecticut", "Hartford", "061")]
STREETS = ["Main St", "Oak Ave", "Maple Dr", "Cedar Ln", "Elm St", "Park Ave", "Pine Rd", "Lake St",
           "Hill Rd", "River Rd"]
ALLERGIES = ["penicillin", "peanuts", "latex", "shellfish", "sulfa", "aspirin", "pollen", "eggs"]
MEDICATIONS = ["metformin", "lisinopril", "atorvastatin", "albuterol", "levothyroxine", "amlodipine",
               "omeprazole", "sertraline"]
BLOOD = ["A+", "A-", "B+", "B-", "AB+", "AB-", "O+", "O-"]


def _spaced(rng: random.Random, text: str) -> str:
    """The text with stray spaces: leading, trailing, or doubled inside."""
    kind = rng.choice(["lead", "trail", "both", "inner"])
    if kind == "inner" and " " in text:
        return text.replace(" ", "  ", 1)
    return {"lead": "  " + text, "trail": text + " ", "both": " " + text + "  "}.get(kind, text + "  ")


def _date_spellings(d: date) -> list[str]:
    """One date as exports write it; slashes are month/day/year, as the instructions say."""
    return [d.isoformat(), d.strftime("%m/%d/%Y"), f"{d.month}/{d.day}/{d.year}", d.strftime("%Y/%m/%d"),
            f"{MONTHS[d.month - 1]} {d.day}, {d.year}", f"{d.day} {MONTHS[d.month - 1][:3]} {d.year}",
            d.strftime("%d-%b-%Y"), d.strftime("%Y%m%d")]


def _phone_spellings(digits: str) -> list[str]:
    a, b, c = digits[:3], digits[3:6], digits[6:]
    return [f"({a}) {b}-{c}", f"{a}-{b}-{c}", f"{a}.{b}.{c}", digits, f"+1 {a} {b} {c}", f"1-{a}-{b}-{c}",
            f"({a}){b}-{c}", f"+1 ({a}) {b}-{c}"]


def _list_spellings(items: list[str], none: str = "none") -> list[object]:
    """A list of lower-case names as a messy export holds it: arrays, separated strings, 'none' markers."""
    if not items:
        return [[], "none", "None", "", None, none, "n/a", "-"]
    caps = [i.capitalize() for i in items]
    upper = [i.upper() for i in items]
    return [list(items), caps, ", ".join(caps), ";".join(items), "; ".join(upper), json.dumps(caps),
            " , ".join(items), [f" {i} " for i in caps]]


def _bool_spellings(value: bool) -> list[object]:
    return ([True, "yes", "Yes", "Y", "TRUE", "true", "1", 1] if value
            else [False, "no", "No", "N", "FALSE", "false", "0", 0])


class Spellings:
    """Spellings of one missing value dealt in turn, so that every one of them occurs once there are enough
    missing cells (a random draw can miss the very spelling an instruction names)."""

    def __init__(self, *spellings: object) -> None:
        self._next = itertools.cycle(spellings).__next__

    def __call__(self) -> object:
        return self._next()


def _dirty(rng: random.Random, spellings: list[object], p: float) -> object:
    """The canonical spelling (first) with probability 1 - p, else one of the others."""
    return spellings[0] if rng.random() >= p or len(spellings) == 1 else rng.choice(spellings[1:])


# ------------------------------------------------------------------------------------------------ patients

def patients(rng: random.Random, n: int = 60, again: int = 3) -> tuple[list[dict], list[dict]]:
    """`n` patients, the last `again` of them patients entered a second time (the same name and birth date,
    written afresh): the duplicates instruction #11 asks to remove."""
    truth, dirty = [], []
    used_ids: set[int] = set()
    no_email = Spellings("unknown", None, "N/A", "", "-", "none")
    no_blood = Spellings("unknown", None, "N/A", "-", "")
    entered: list[tuple] = []
    for k in range(n):
        if k < n - again:
            number = rng.choice([i for i in range(1, 4000) if i not in used_ids])
            used_ids.add(number)
            gender = rng.choice("MF")
            first = rng.choice(FIRST_M if gender == "M" else FIRST_F)
            last = rng.choice(LAST)
            born = date(1940, 1, 1) + timedelta(days=rng.randrange(0, 65 * 365))
            entered.append((number, gender, first, last, born))
        else:  # a patient entered again: the same person, the other fields and every spelling drawn afresh
            number, gender, first, last, born = entered[rng.randrange(len(entered))]
        code, state, city, zip3 = rng.choice(PLACES)
        zip5 = zip3 + f"{rng.randrange(0, 100):02d}"
        street = f"{rng.randrange(1, 999)} {rng.choice(STREETS)}"
        area = rng.choice(["617", "212", "973", "619", "512", "312", "206", "860"])
        phone = f"{area}555{rng.randrange(0, 10000):04d}"
        email = (f"{first}.{last}{rng.randrange(1, 99)}@{rng.choice(['gmail.com', 'yahoo.com', 'outlook.com'])}".lower()
                 if rng.random() > 0.15 else None)
        blood = rng.choice(BLOOD) if rng.random() > 0.1 else None
        allergies = rng.sample(ALLERGIES, rng.choice([0, 0, 1, 1, 2, 3]))
        meds = rng.sample(MEDICATIONS, rng.choice([0, 1, 1, 2, 2, 3]))
        smoker = rng.random() < 0.25
        address = {"street": street, "city": city, "state": code, "zip": zip5}
        t = {"patient_id": f"P-{number:05d}", "name": f"{first} {last}", "birth_date": born.isoformat(),
             "gender": gender, "phone": f"({phone[:3]}) {phone[3:6]}-{phone[6:]}", "email": email,
             "blood_type": blood, "smoker": smoker, "allergies": allergies, "medications": meds,
             "address": address}
        truth.append(t)

        title = rng.choice(["Dr.", "Dr", "Mr.", "Mr"] if gender == "M" else ["Dr.", "Mrs.", "Ms.", "Ms", "Mrs"])
        d_address: object
        if rng.random() < 0.08:  # the whole address as one line of text
            d_address = f"{street}, {city}, {code} {zip5}"
        else:
            d_address = {
                "street": _dirty(rng, [street, street + " ", " " + street], 0.2),
                "city": _dirty(rng, [city, city.upper(), city.lower(), " " + city + " "], 0.35),
                "state": _dirty(rng, [code, code.lower(), state, state.upper(), state.lower()], 0.45),
                "zip": _dirty(rng, [zip5, int(zip5), f"{zip5}-{rng.randrange(1000, 9999)}", " " + zip5], 0.4),
            }
        dirty.append({
            "patient_id": _dirty(rng, [t["patient_id"], f"p-{number:05d}", f"P{number:05d}", f"P-{number}",
                                       str(number), number, f" P-{number:05d} "], 0.45),
            "name": _dirty(rng, [t["name"], f"{title} {first} {last}", f"{first.upper()} {last.upper()}",
                                 f"{first.lower()} {last.lower()}", _spaced(rng, t["name"]), f"{last}, {first}",
                                 f"{title} {last.upper()}, {first}"], 0.55),
            "birth_date": _dirty(rng, _date_spellings(born), 0.65),
            "gender": _dirty(rng, [gender, gender.lower(), "Male" if gender == "M" else "Female",
                                   "male" if gender == "M" else "female", "MALE" if gender == "M" else "FEMALE",
                                   gender + " "], 0.5),
            "phone": _dirty(rng, _phone_spellings(phone), 0.65),
            "email": (_dirty(rng, [email, email.upper(), " " + email, email.capitalize() + " "], 0.3) if email
                      else no_email()),
            "blood_type": (_dirty(rng, [blood, blood.lower(), blood.replace("+", " pos").replace("-", " neg"),
                                        blood.replace("+", " positive").replace("-", " negative"),
                                        blood.replace("+", "+ve").replace("-", "-ve")], 0.4) if blood
                           else no_blood()),
            "smoker": _dirty(rng, _bool_spellings(smoker), 0.6),
            "allergies": _dirty(rng, _list_spellings(allergies, none="NKDA"), 0.7),
            "medications": _dirty(rng, _list_spellings(meds), 0.6),
            "address": d_address,
        })
    return dirty, truth


# ------------------------------------------------------------------------------------------------ products

CATEGORIES = {"Electronics": (1, ["Wireless Mouse", "USB-C Hub", "Bluetooth Speaker", "Webcam HD", "Smart Plug",
                                  "Noise Cancelling Headphones"]),
              "Home": (2, ["Ceramic Mug Set", "Cotton Bath Towel", "LED Desk Lamp", "Wall Clock", "Throw Pillow"]),
              "Garden": (3, ["Garden Hose 50ft", "Pruning Shears", "Solar Path Light", "Raised Planter Box"]),
              "Toys": (4, ["Wooden Puzzle", "Building Blocks 500pc", "Plush Bear", "Kite Classic"]),
              "Clothing": (5, ["Rain Jacket", "Wool Socks 3-Pack", "Denim Shorts", "Running Cap"])}
BRANDS = ["Acme", "Northwind", "Bluepeak", "Zenith", "Orbit", "Harbor", "Lumen"]
#: (code, spellings of the same country)
COUNTRIES = [("US", ["us", "USA", "United States", "U.S.", "usa"]),
             ("DE", ["de", "Germany", "DEU", "germany"]),
             ("GB", ["gb", "UK", "United Kingdom", "U.K.", "GBR"]),
             ("CN", ["cn", "China", "CHN", "china"]),
             ("JP", ["jp", "Japan", "JPN"]),
             ("MX", ["mx", "Mexico", "MEX"])]


def _kg_text(grams: int) -> str:
    return repr(grams / 1000)


def products(rng: random.Random, n: int = 75) -> tuple[list[dict], list[dict]]:
    truth, dirty = [], []
    used: set[str] = set()
    no_qty = Spellings("unknown", "", "N/A", "-", "n/a")
    for _ in range(n):
        while True:
            sku = "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(3)) + f"-{rng.randrange(1000, 10000)}"
            if sku not in used:
                used.add(sku)
                break
        category = rng.choice(list(CATEGORIES))
        number, names = CATEGORIES[category]
        name = rng.choice(names)
        brand = rng.choice(BRANDS).upper()
        # Electronics reach the thousands (and their separators); the rest cost what such things cost.
        top = 250000 if category == "Electronics" else 12000
        cents = rng.choice([rng.randrange(199, 4999), rng.randrange(999, top)])
        price = f"{cents // 100}.{cents % 100:02d}"
        grams = rng.randrange(60, 8000)
        while grams % 1000 == 0:
            grams += 5
        in_stock = rng.random() < 0.7
        qty = (str(rng.choice([rng.randrange(1, 60), rng.randrange(100, 5000)])) if in_stock else "0")
        if rng.random() < 0.1:
            qty = ""
        released = date(2018, 1, 1) + timedelta(days=rng.randrange(0, 6 * 365))
        country, country_spellings = rng.choice(COUNTRIES)
        rating = f"{rng.randrange(10, 51) / 10:.1f}"
        t = {"sku": sku, "product_name": name, "category": str(number), "brand": brand, "price": price,
             "weight_kg": _kg_text(grams), "in_stock": "true" if in_stock else "false", "stock_qty": qty,
             "release_date": released.isoformat(), "supplier_country": country, "rating": rating}
        truth.append(t)

        whole, frac = price.split(".")
        grouped = f"{int(whole):,}"
        short = price.rstrip("0").rstrip(".") if frac.endswith("0") else price
        dirty.append({
            "sku": _dirty(rng, [sku, sku.lower(), sku.replace("-", ""), sku.replace("-", " ").lower(),
                                " " + sku, sku[:3].capitalize() + sku[3:]], 0.5),
            "product_name": _dirty(rng, [name, _spaced(rng, name)], 0.4),
            "category": _dirty(rng, [category, category.lower(), category.upper(), " " + category + " "], 0.999),
            "brand": _dirty(rng, [brand, brand.capitalize(), brand.lower(), brand.capitalize() + " "], 0.8),
            "price": _dirty(rng, [price, f"${grouped}.{frac}", f"$ {grouped}.{frac}", f"{grouped}.{frac} USD",
                                  f"USD {price}", short, f"${short}", f"US$ {grouped}.{frac}"], 0.7),
            "weight_kg": _dirty(rng, [t["weight_kg"], f"{grams} g", f"{grams}g", f"{t['weight_kg']} kg",
                                      f"{t['weight_kg']}kg", f"{grams} grams"], 0.6),
            "in_stock": _dirty(rng, [str(x).lower() if isinstance(x, bool) else str(x)
                                     for x in _bool_spellings(in_stock)], 0.6),
            "stock_qty": (_dirty(rng, [qty, f"{int(qty):,}", f"{qty} units", " " + qty, f"{qty} pcs"], 0.45)
                          if qty else no_qty()),
            "release_date": _dirty(rng, _date_spellings(released), 0.6),
            "supplier_country": _dirty(rng, [country] + country_spellings, 0.6),
            "rating": _dirty(rng, [rating, f"{rating}/5", f"{rating} stars", rating.replace(".", ","),
                                   f"{rating} / 5"], 0.45),
        })
    return dirty, truth


# -------------------------------------------------------------------------------------------- transactions

MCC = [5411, 5812, 5541, 4121, 742, 5732, 7011, 4511, 5912, 763]
CHANNELS = {"online": 1, "in-store": 2, "phone": 3}
SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}


def _amount_text(cents: int) -> str:
    return f"{abs(cents) // 100:,}.{abs(cents) % 100:02d}"


def transactions(rng: random.Random, n: int = 90) -> tuple[list[dict], list[dict]]:
    truth, dirty = [], []
    no_email = Spellings("unknown", None, "", "N/A", "-")
    when = datetime(2024, 3, 1, 8, 0, 0)
    for i in range(n):
        number = 100000 + i * 7 + rng.randrange(0, 7)
        when += timedelta(minutes=rng.randrange(3, 300), seconds=rng.choice([0, 0, 0, rng.randrange(1, 60)]))
        kind = rng.choices(["purchase", "refund", "transfer"], [7, 2, 2])[0]
        cents = rng.choice([rng.randrange(150, 9999), rng.randrange(10000, 250000)])
        if kind == "refund":
            cents = -cents
        currency = rng.choices(["USD", "EUR", "GBP"], [6, 3, 2])[0]
        status = rng.choices(["completed", "pending", "failed"], [8, 2, 1])[0]
        channel = rng.choice(list(CHANNELS))
        mcc = rng.choice(MCC)
        last4 = f"{rng.randrange(0, 10000):04d}"
        abroad = rng.random() < 0.2
        first, last = rng.choice(FIRST_M + FIRST_F), rng.choice(LAST)
        domain = rng.choice(["gmail.com", "example.org", "mail.com"])
        email = f"{first}.{last}@{domain}".lower() if rng.random() > 0.12 else None
        amount = cents / 100
        t = {"txn_id": f"TXN-{number:06d}", "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S"), "customer_email": email,
             "amount": amount, "currency": currency, "type": kind, "status": status, "channel": CHANNELS[channel],
             "mcc": f"{mcc:04d}", "card_last4": last4, "is_international": abroad}
        truth.append(t)

        stamps = [t["timestamp"], when.strftime("%Y-%m-%d %H:%M:%S"), t["timestamp"] + "Z",
                  when.strftime("%m/%d/%Y %H:%M:%S"), f"{when.day} {MONTHS[when.month - 1][:3]} {when.year} "
                  + when.strftime("%H:%M:%S")]
        if when.second == 0:
            hour12 = when.hour % 12 or 12
            stamps += [when.strftime("%Y-%m-%d %H:%M"), when.strftime("%m/%d/%Y %H:%M"),
                       f"{when.month}/{when.day}/{when.year} {hour12}:{when.minute:02d} "
                       + ("PM" if when.hour >= 12 else "AM")]
        text = _amount_text(cents)
        plain = f"{abs(cents) / 100:.2f}"
        sign = "-" if cents < 0 else ""
        amounts: list[object] = [amount, f"{sign}{plain}", f"{sign}{SYMBOLS[currency]}{text}",
                                 f"{sign}{text} {currency}", f"{sign}{SYMBOLS[currency]} {text}"]
        if cents < 0:
            amounts += [f"({text})", f"({SYMBOLS[currency]}{text})"]
        dirty.append({
            "txn_id": _dirty(rng, [t["txn_id"], f"txn-{number:06d}", f"TXN{number:06d}", number, str(number),
                                   f"txn_{number}"], 0.45),
            "timestamp": _dirty(rng, stamps, 0.65),
            "customer_email": (_dirty(rng, [email, email.upper(), " " + email + " ", email.title()], 0.3) if email
                               else no_email()),
            "amount": _dirty(rng, amounts, 0.6),
            "currency": _dirty(rng, [currency, currency.lower(), SYMBOLS[currency], currency.capitalize(),
                                     " " + currency], 0.4),
            "type": _dirty(rng, [kind, kind.upper(), kind.capitalize(), kind + " "]
                           + (["xfer", "XFER", "Xfer"] if kind == "transfer" else []), 0.5),
            "status": _dirty(rng, [status, status.upper(), status.capitalize(), " " + status], 0.45),
            "channel": _dirty(rng, {"online": ["online", "Online", "ONLINE", "on-line", " online"],
                                    "in-store": ["in-store", "In-Store", "in store", "IN STORE", "instore"],
                                    "phone": ["phone", "Phone", "PHONE", " phone "]}[channel], 0.999),
            "mcc": _dirty(rng, [t["mcc"], mcc, f"MCC {mcc:04d}", f" {mcc:04d}", f"mcc:{mcc}"], 0.6),
            "card_last4": _dirty(rng, [last4, f"**** **** **** {last4}", f"xxxx-xxxx-xxxx-{last4}",
                                       f"ending in {last4}", int(last4), f"*{last4}"], 0.7),
            "is_international": _dirty(rng, _bool_spellings(abroad), 0.5),
        })
    # An export is not in time order; the truth keeps the file's order (sorting is no row-level fix).
    order = list(range(n))
    rng.shuffle(order)
    return [dirty[i] for i in order], [truth[i] for i in order]


# ----------------------------------------------------------------------------------------------- writing

def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


#: What each instruction speaks of, as the dirty file must hold it: (item, column, a pattern some cell of the
#: column matches; a cell that is not text is matched as its JSON).
SPOKEN: dict[str, list[tuple[int, str, str]]] = {
    "patients": [
        (2, "name", r"^(Dr|Mr|Mrs|Ms)\.? "), (2, "name", r"[A-Za-z]+, [A-Z][a-z]+$"), (2, "name", r"\S  +\S|^ | $"),
        (3, "birth_date", r"^\d{1,2}/\d{1,2}/\d{4}$"),
        (5, "phone", r"^\+1 "), (5, "phone", r"^1-"),
        *[(6, "email", rf"^{re.escape(v)}$") for v in ("", "N/A", "-", "unknown", "none")],
        (7, "blood_type", r"^A pos$|^A positive$|^[ABO]+ pos"), (7, "blood_type", r"^unknown$"),
        *[(9, "allergies", rf"^{re.escape(v)}$") for v in ("none", "NKDA", "n/a", "-", "", "null")],
        (10, "address", r"^[^{].*, [A-Z]{2} \d{5}$"), (10, "address", r"\d{5}-\d{4}"),
    ],
    "products": [
        (3, "category", r"(?i)^ *(electronics|home|garden|toys|clothing) *$"),
        (5, "price", r"\$"), (5, "price", r"USD"), (5, "price", r"\d,\d{3}"),
        (6, "weight_kg", r"\d ?g$|grams"),
        *[(8, "stock_qty", rf"^{re.escape(v)}$") for v in ("N/A", "-", "unknown")],
        (9, "release_date", r"^\d{1,2}/\d{1,2}/\d{4}$"),
        (10, "supplier_country", r"^United Kingdom$"),
        (11, "rating", r"/5"), (11, "rating", r"stars"), (11, "rating", r"^\d,\d$"),
    ],
    "transactions": [
        (2, "timestamp", r"/"), (2, "timestamp", r" [AP]M$"), (2, "timestamp", r"Z$"),
        *[(3, "customer_email", rf"^{re.escape(v)}$") for v in ("", "N/A", "-", "unknown")],
        (4, "amount", r"^\(.*\)$"), (4, "amount", r"\d,\d{3}"),
        (5, "currency", r"^\$$"), (5, "currency", r"^€$"), (5, "currency", r"^£$"),
        (6, "type", r"(?i)^xfer$"),
    ],
}


def _cell_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def check_spoken(case: str, dirty: list[dict], truth: list[dict]) -> None:
    """Fail loudly unless the dirty file holds what each instruction speaks of (`SPOKEN`), the duplicate
    patients and the unsorted transactions included."""
    missing = [f"#{item}: no {column!r} cell matches {pattern!r}" for item, column, pattern in SPOKEN[case]
               if not any(re.search(pattern, _cell_text(row[column])) for row in dirty)]
    if case == "patients" and len({(t["name"], t["birth_date"]) for t in truth}) == len(truth):
        missing.append("#11: no two patients share a name and a birth date")
    if case == "transactions" and [t["timestamp"] for t in truth] == sorted(t["timestamp"] for t in truth):
        missing.append("#12: the file is already sorted by timestamp")
    if missing:
        raise SystemExit(f"make_cases: the {case} file does not hold what its instructions speak of: "
                         + "; ".join(missing) + ". Change the spellings or the seed so that it does.")


def main(out: Path = HERE) -> None:
    """Write the dirty files and their truth into `out`, each checked against its instructions first."""
    out.mkdir(parents=True, exist_ok=True)
    dirty, truth = patients(random.Random(1301))
    check_spoken("patients", dirty, truth)
    (out / "patients.jsonl").write_text(_jsonl(dirty), encoding="utf-8")
    (out / "patients.truth.jsonl").write_text(_jsonl(truth), encoding="utf-8")
    dirty, truth = products(random.Random(1303))
    check_spoken("products", dirty, truth)
    (out / "products.csv").write_text(_csv(dirty), encoding="utf-8")
    (out / "products.truth.csv").write_text(_csv(truth), encoding="utf-8")
    dirty, truth = transactions(random.Random(1305))
    check_spoken("transactions", dirty, truth)
    (out / "transactions.jsonl").write_text(_jsonl(dirty), encoding="utf-8")
    (out / "transactions.truth.jsonl").write_text(_jsonl(truth), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
