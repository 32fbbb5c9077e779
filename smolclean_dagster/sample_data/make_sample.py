"""Generate the demo drops shipped with the package: `customers.csv` (360 rows) and `orders.jsonl` (300 lines).

Run `python -m smolclean_dagster.sample_data.make_sample` to regenerate both files; the output is
deterministic (seeded), and the committed files are its output.

The dirt, on purpose and in realistic proportions:
  whitespace       names and cities with surrounding spaces, names with doubled inner spaces
  null tokens      "N/A", "n/a", "none", "NULL", "-" where a value is missing
  case variants    "new york" / "NEW YORK" beside "New York", "pro" / "PRO", "ny", "usd", "Shipped"
  misspellings     rare "Chicgo", "Premum", "Enterprize", "deliverd" beside the frequent spelling
  currency         "$1,249.00", "USD 99.00" and thousands separators beside plain "1249.00"
  units            "50 GB", "50GB", "50 gb" beside plain "50"; "1.5 kg" beside "1.5"; "2 pcs" beside 2
  mixed dates      ISO beside "03/22/2021", "March 22, 2021", "22-Mar-21" (and datetimes in orders)
  booleans         true/false beside yes/no, Y/N, 1/0, TRUE
"""

from __future__ import annotations

import csv
import json
import logging
import random
from datetime import date, datetime, timedelta
from pathlib import Path

log = logging.getLogger("smolclean.sample_data")

HERE = Path(__file__).parent
SEED = 20240611

FIRST = (
    "Ana", "Ben", "Carla", "David", "Elena", "Farid", "Grace", "Hiro", "Ines", "James", "Kofi", "Laura", "Mateo",
    "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Samuel", "Tara", "Umar", "Vera", "Wei", "Yusuf", "Zoe",
)
LAST = (
    "Lopez", "Smith", "Okafor", "Nguyen", "Rossi", "Haddad", "Kim", "Tanaka", "Garcia", "Brown", "Mensah",
    "Schmidt", "Silva", "Patel", "Cohen", "Ivanova", "Dubois", "Moreau", "Khan", "Murphy",
)
DOMAINS = ("example.com", "mail.example.org", "inbox.example.net")
CITIES = (  # (city, state, weight)
    ("New York", "NY", 9), ("Los Angeles", "CA", 7), ("Chicago", "IL", 7), ("Houston", "TX", 5),
    ("Phoenix", "AZ", 4), ("Philadelphia", "PA", 4), ("San Antonio", "TX", 3), ("San Diego", "CA", 4),
    ("Dallas", "TX", 4), ("Austin", "TX", 4), ("Seattle", "WA", 5), ("Denver", "CO", 4), ("Boston", "MA", 5),
    ("Portland", "OR", 3), ("Atlanta", "GA", 4),
)
PLANS = (("Basic", 10, "19.00"), ("Pro", 7, "49.00"), ("Premium", 4, "99.00"), ("Enterprise", 2, "1249.00"))
MISSPELLED = {"Chicago": "Chicgo", "Seattle": "Seatle", "Premium": "Premum", "Enterprise": "Enterprize"}


def _pick(rng: random.Random, options: tuple, weights: list[int] | None = None):
    return rng.choices(options, weights=weights, k=1)[0]


def _chance(rng: random.Random, p: float) -> bool:
    return rng.random() < p


def _date_text(rng: random.Random, day: date) -> str:
    """ISO most of the time; otherwise one of three other formats people export."""
    r = rng.random()
    if r < 0.84:
        return day.isoformat()
    if r < 0.92:
        return day.strftime("%m/%d/%Y")
    if r < 0.97:
        return f"{day.strftime('%B')} {day.day}, {day.year}"
    return day.strftime("%d-%b-%y")


def _money_text(rng: random.Random, amount: str) -> str:
    r = rng.random()
    whole, cents = amount.split(".")
    grouped = f"{int(whole):,}.{cents}"
    if r < 0.08:
        return f"${grouped}"
    if r < 0.11:
        return f"USD {amount}"
    if r < 0.14 and int(whole) >= 1000:
        return grouped
    return amount


def _storage_text(rng: random.Random, gigabytes: int) -> str:
    r = rng.random()
    if r < 0.10:
        return f"{gigabytes} GB"
    if r < 0.15:
        return f"{gigabytes}GB"
    if r < 0.18:
        return f"{gigabytes} gb"
    return str(gigabytes)


def _boolean_text(rng: random.Random, value: bool) -> str:
    styles = (("true", "false"), ("yes", "no"), ("Y", "N"), ("1", "0"), ("TRUE", "FALSE"))
    style = _pick(rng, styles, [60, 15, 10, 10, 5])
    return style[0] if value else style[1]


def customers(rng: random.Random, n: int = 360) -> list[dict[str, str]]:
    """The customer rows, dirt included."""
    rows = []
    start = date(2019, 1, 1)
    for i in range(1, n + 1):
        first, last = _pick(rng, FIRST), _pick(rng, LAST)
        city, state, _ = _pick(rng, CITIES, [w for *_, w in CITIES])
        plan, _, price = _pick(rng, PLANS, [w for _, w, _ in PLANS])
        name = f"{first}  {last}" if _chance(rng, 0.03) else f"{first} {last}"
        if _chance(rng, 0.05):
            name = _pick(rng, (f" {name}", f"{name} ", f"  {name}"))
        email = f"{first}.{last}{i}@{_pick(rng, DOMAINS)}".lower()
        if _chance(rng, 0.03):
            email = _pick(rng, ("n/a", "N/A"))
        phone = f"({rng.randint(201, 989)}) {rng.randint(200, 999)}-{rng.randint(0, 9999):04d}"
        if _chance(rng, 0.05):
            phone = _pick(rng, ("N/A", "-", "none"))
        if _chance(rng, 0.05):
            city = _pick(rng, (city.lower(), city.upper()))
        elif _chance(rng, 0.03):
            city = f"{city} " if _chance(rng, 0.5) else f" {city}"
        elif _chance(rng, 0.02):
            city = "none"
        if _chance(rng, 0.03):
            state = state.lower()
        signup = start + timedelta(days=rng.randint(0, 5 * 365))
        signup_text = "NULL" if _chance(rng, 0.02) else _date_text(rng, signup)
        if _chance(rng, 0.05):
            plan_text = _pick(rng, (plan.lower(), plan.upper()))
        else:
            plan_text = plan
        spend = "-" if _chance(rng, 0.03) else _money_text(rng, price)
        rows.append(
            {
                "customer_id": f"C{i:04d}",
                "name": name,
                "email": email,
                "phone": phone,
                "city": city,
                "state": state,
                "signup_date": signup_text,
                "plan": plan_text,
                "monthly_spend": spend,
                "storage": _storage_text(rng, _pick(rng, (10, 50, 100, 250, 1000))),
                "is_active": _boolean_text(rng, _chance(rng, 0.8)),
            }
        )
    # a few rare misspellings of frequent categories, so the demo always shows them: each in the first row from a
    # fixed one that holds the value (a misspelt city is still that city's customer, in its state; a misspelt plan
    # still costs that plan's price)
    for row_index, (column, right) in zip((17, 88, 143, 201, 266), (("city", "Chicago"), ("city", "Seattle"),
                                                                     ("plan", "Premium"), ("plan", "Enterprise"),
                                                                     ("plan", "Premium"))):
        row_index = next(i for i in range(row_index, n) if rows[i][column] == right)
        rows[row_index][column] = MISSPELLED[right]
    return rows


def orders(rng: random.Random, n: int = 300, n_customers: int = 360) -> list[dict[str, object]]:
    """The order records, dirt included; JSON keeps numbers and booleans typed where the source did."""
    records = []
    start = datetime(2023, 1, 1, 8, 0)
    statuses = ("shipped", "delivered", "pending", "cancelled")
    for i in range(1, n + 1):
        when = start + timedelta(minutes=rng.randint(0, 365 * 24 * 60))
        r = rng.random()
        if r < 0.75:
            order_date = when.strftime("%Y-%m-%d %H:%M")
        elif r < 0.87:
            order_date = when.strftime("%m/%d/%Y %I:%M %p")
        elif r < 0.95:
            order_date = f"{when.strftime('%B')} {when.day}, {when.year}"
        else:
            order_date = when.strftime("%Y/%m/%d")
        cents = rng.randint(500, 250000)
        amount_text = f"{cents // 100}.{cents % 100:02d}"
        r = rng.random()
        amount: object = float(amount_text) if r < 0.6 else _money_text(rng, amount_text)
        if _chance(rng, 0.03):
            amount = None
        status = _pick(rng, statuses, [40, 35, 15, 10])
        shipped = status in ("shipped", "delivered")
        if _chance(rng, 0.06):
            status = status.capitalize() if _chance(rng, 0.5) else status.upper()
        quantity: object = rng.randint(1, 6)
        if _chance(rng, 0.12):
            quantity = f"{quantity} pcs"
        weight = f"{rng.randint(1, 200) / 10:.1f}"
        r = rng.random()
        weight_value = f"{weight} kg" if r < 0.10 else f"{weight}kg" if r < 0.14 else weight
        shipped_value: object = shipped
        if _chance(rng, 0.2):
            shipped_value = _pick(rng, ("yes", "Y", "1"), None) if shipped else _pick(rng, ("no", "N", "0"), None)
        records.append(
            {
                "order_id": f"O{10000 + i}",
                "customer_id": f"C{rng.randint(1, n_customers):04d}",
                "amount": amount,
                "currency": "usd" if _chance(rng, 0.05) else "USD",
                "order_date": "N/A" if _chance(rng, 0.02) else order_date,
                "status": status,
                "shipped": shipped_value,
                "quantity": quantity,
                "weight_kg": weight_value,
            }
        )
    records[42]["status"] = "deliverd"
    records[211]["status"] = "shiped"
    return records


def main(out_dir: Path = HERE) -> None:
    """Write customers.csv and orders.jsonl into `out_dir` (by default next to this script)."""
    rng = random.Random(SEED)
    rows = customers(rng)
    with (out_dir / "customers.csv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    records = orders(rng, n_customers=len(rows))
    with (out_dir / "orders.jsonl").open("w", encoding="utf-8", newline="\n") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    log.info("wrote %d customers and %d orders to %s", len(rows), len(records), out_dir)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
