"""A hand-written cleaner that follows each case's instructions, row by row, from the dirty row alone.

It shows that the truth is reachable: every dirty cell can be recovered from its row and the written
instructions (the test expects F1 1.0 on every case). It is a check on the cases, not a model of the product.

Run: `python benchmarks/instructed/reference_clean.py CASE OUT` (OUT: .jsonl for JSON cases, .csv for products).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
NULLS = {"", "n/a", "-", "unknown", "none", "null", "nkda"}
STATES = {"massachusetts": "MA", "new york": "NY", "new jersey": "NJ", "california": "CA", "texas": "TX",
          "illinois": "IL", "washington": "WA", "connecticut": "CT"}
COUNTRIES = {"usa": "US", "united states": "US", "u.s.": "US", "germany": "DE", "deu": "DE", "uk": "GB",
             "united kingdom": "GB", "u.k.": "GB", "gbr": "GB", "china": "CN", "chn": "CN", "japan": "JP",
             "jpn": "JP", "mexico": "MX", "mex": "MX"}
CATEGORIES = {"electronics": 1, "home": 2, "garden": 3, "toys": 4, "clothing": 5}
DATE_FORMATS = ["%Y-%m-%d", "%m/%d/%Y", "%Y/%m/%d", "%B %d, %Y", "%d %b %Y", "%d-%b-%Y", "%Y%m%d"]
TIME_FORMATS = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%m/%d/%Y %H:%M:%S", "%d %b %Y %H:%M:%S",
                "%Y-%m-%d %H:%M", "%m/%d/%Y %H:%M", "%m/%d/%Y %I:%M %p"]


def _text(v: object) -> str:
    return "" if v is None else str(v).strip()


def _missing(v: object) -> bool:
    return _text(v).lower() in NULLS


def _parse(value: str, formats: list[str]) -> datetime:
    for fmt in formats:
        try:
            return datetime.strptime(value, fmt)
        except ValueError:
            continue
    raise ValueError(f"no format reads {value!r}")


def _digits(v: object) -> str:
    return re.sub(r"\D", "", _text(v))


def _bool(v: object) -> bool:
    return _text(v).lower() in {"true", "yes", "y", "1"}


def _items(v: object) -> list[str]:
    if isinstance(v, str) and v.strip().startswith("["):
        v = json.loads(v)
    if isinstance(v, list):
        return [str(i).strip().lower() for i in v]
    if _missing(v):
        return []
    return [p.strip().lower() for p in re.split(r"[;,]", _text(v)) if p.strip()]


def patient(r: dict) -> dict:
    name = _text(r["name"])
    name = re.sub(r"^(dr|mr|mrs|ms)\.?\s+", "", name, flags=re.I)
    if "," in name:
        last, first = (p.strip() for p in name.split(",", 1))
        name = f"{first} {last}"
    address = r["address"]
    if isinstance(address, str):
        street, city, rest = (p.strip() for p in address.split(","))
        state, zip_code = rest.split()
        address = {"street": street, "city": city, "state": state, "zip": zip_code}
    state = _text(address["state"])
    blood = _text(r["blood_type"]).upper().replace(" POSITIVE", "+").replace(" NEGATIVE", "-")
    blood = blood.replace(" POS", "+").replace(" NEG", "-").replace("VE", "")
    phone = _digits(r["phone"])[-10:]
    return {
        "patient_id": f"P-{int(_digits(r['patient_id'])):05d}",
        "name": " ".join(name.split()).title(),
        "birth_date": _parse(_text(r["birth_date"]), DATE_FORMATS).date().isoformat(),
        "gender": _text(r["gender"])[0].upper(),
        "phone": f"({phone[:3]}) {phone[3:6]}-{phone[6:]}",
        "email": None if _missing(r["email"]) else _text(r["email"]).lower(),
        "blood_type": None if _missing(r["blood_type"]) else blood,
        "smoker": _bool(r["smoker"]),
        "allergies": _items(r["allergies"]),
        "medications": _items(r["medications"]),
        "address": {"street": _text(address["street"]), "city": _text(address["city"]).title(),
                    "state": STATES.get(state.lower(), state.upper()), "zip": _digits(address["zip"])[:5].zfill(5)},
    }


def product(r: dict) -> dict:
    sku = re.sub(r"[^A-Z0-9]", "", r["sku"].upper())
    price = re.sub(r"[^\d.]", "", r["price"])
    weight = r["weight_kg"].strip().lower()
    grams = re.fullmatch(r"([\d.]+)\s*(g|grams)", weight)
    qty = _digits(r["stock_qty"])
    country = r["supplier_country"].strip()
    rating = re.sub(r"\s*(/\s*5|stars)$", "", r["rating"].strip()).replace(",", ".")
    return {
        "sku": f"{sku[:3]}-{sku[3:]}",
        "product_name": " ".join(r["product_name"].split()),
        "category": str(CATEGORIES[r["category"].strip().lower()]),
        "brand": r["brand"].strip().upper(),
        "price": f"{float(price):.2f}",
        "weight_kg": repr(int(grams[1]) / 1000) if grams else repr(float(re.sub(r"\s*kg$", "", weight))),
        "in_stock": "true" if _bool(r["in_stock"]) else "false",
        "stock_qty": "" if _missing(r["stock_qty"]) else qty,
        "release_date": _parse(r["release_date"].strip(), DATE_FORMATS).date().isoformat(),
        "supplier_country": COUNTRIES.get(country.lower(), country.upper()),
        "rating": f"{float(rating):.1f}",
    }


def transaction(r: dict) -> dict:
    amount = _text(r["amount"])
    negative = amount.startswith(("-", "("))
    value = float(re.sub(r"[^\d.]", "", amount))
    currency = {"$": "USD", "€": "EUR", "£": "GBP"}.get(_text(r["currency"]), _text(r["currency"]).upper())
    kind = _text(r["type"]).lower()
    channel = re.sub(r"[^a-z]", "", _text(r["channel"]).lower())
    return {
        "txn_id": f"TXN-{int(_digits(r['txn_id'])):06d}",
        "timestamp": _parse(_text(r["timestamp"]).removesuffix("Z"), TIME_FORMATS).strftime("%Y-%m-%dT%H:%M:%S"),
        "customer_email": None if _missing(r["customer_email"]) else _text(r["customer_email"]).lower(),
        "amount": -value if negative else value,
        "currency": currency,
        "type": "transfer" if kind == "xfer" else kind,
        "status": _text(r["status"]).lower(),
        "channel": {"online": 1, "instore": 2, "phone": 3}[channel],
        "mcc": _digits(r["mcc"]).zfill(4),
        "card_last4": _digits(r["card_last4"]).zfill(4)[-4:],
        "is_international": _bool(r["is_international"]),
    }


def main(case: str, out: Path) -> None:
    """Clean the case's dirty file into `out`."""
    if case == "products":
        with (HERE / "products.csv").open(encoding="utf-8", newline="") as fh:
            rows = [product(r) for r in csv.DictReader(fh)]
        with out.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return
    clean = {"patients": patient, "transactions": transaction}[case]
    lines = (HERE / f"{case}.jsonl").read_text(encoding="utf-8").splitlines()
    out.write_text("".join(json.dumps(clean(json.loads(line)), ensure_ascii=False) + "\n" for line in lines),
                   encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
