#!/usr/bin/env python3
"""Generate a clean/dirty CSV pair for testing a data-cleaning tool.

Scenario: a retail product-catalog export, one row per product listing per
store, ordered by `listed_on`.  The second half of the rows (1,001+) brings
brands, products and stores that the first half never holds.

Writes, into the folder given (`python catalog.py DIR`; default: the current one):
    catalog/clean.csv   the truth
    catalog/dirty.csv   same header, shape and row order; dirt injected into a
                        copy of the truth (every cell is a string)
    catalog/NOTES.md    each dirt kind and each trap with per-half counts

Standard library only.  The random seed is fixed, so reruns are identical.
"""

import csv
import math
import random
import sys
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

SEED = 20240517
N_ROWS = 2000
HALF = N_ROWS // 2
#: Where the pair is written: `python catalog.py DIR` writes DIR/catalog/ (default: the current folder).
OUT_DIR = Path(sys.argv[1] if len(sys.argv) > 1 else ".") / "catalog"
EXPORT_DATE = date(2025, 1, 31)

COLUMNS = [
    "listing_id", "sku", "brand", "product_name", "category", "size", "price",
    "currency", "in_stock", "store", "store_city", "listed_on",
    "discontinued_on", "rating",
]

rng = random.Random(SEED)

# ---------------------------------------------------------------------------
# Reference data
# ---------------------------------------------------------------------------

# (brand, category, products listed from the start, products first listed in
#  the second half).  A brand whose first list is empty is a second-half brand.
CATALOG = [
    # Electronics
    ("HP", "Electronics", ["HP Pavilion 15.6-in Laptop", "HP OfficeJet Pro 9015e Printer",
                           "HP 24mh FHD Monitor", "HP X3000 G2 Wireless Mouse"],
     ["HP OmniBook X 14-in Laptop"]),
    ("LG", "Electronics", ["LG 27UL500-W 27-in 4K Monitor", "LG gram 16 Laptop",
                           "LG UltraGear 32-in Gaming Monitor"], []),
    ("Samsung", "Electronics", ["Samsung Galaxy Tab A9+ 11-in Tablet", "Samsung T7 Portable SSD 1TB",
                                "Samsung 980 PRO NVMe SSD 2TB"],
     ["Samsung Galaxy Tab S9 FE"]),
    ("GoPro", "Electronics", ["GoPro HERO12 Black", "GoPro MAX 360 Camera", "GoPro Volta Battery Grip"],
     ["GoPro HERO13 Black"]),
    ("Lenovo", "Electronics", ["Lenovo IdeaPad 3 14-in Laptop", "Lenovo ThinkPad E14 Gen 5",
                               "Lenovo Tab M10 Plus"], []),
    ("Anker", "Electronics", [], ["Anker PowerCore 10000 Power Bank", "Anker 735 Charger 65W",
                                  "Anker USB-C Hub 7-in-1"]),
    ("ASUS", "Electronics", [], ["ASUS Vivobook 15 Laptop", "ASUS ROG Strix G16 Gaming Laptop"]),
    ("TCL", "Electronics", [], ["TCL 55-in Q6 4K QLED TV", "TCL 43-in S4 4K TV"]),
    # Audio
    ("JBL", "Audio", ["JBL Flip 6 Bluetooth Speaker", "JBL Tune 510BT Headphones", "JBL PartyBox 110"],
     ["JBL Charge 5 Speaker"]),
    ("Sony", "Audio", ["Sony WH-1000XM5 Headphones", "Sony WF-C700N Earbuds", "Sony SRS-XB100 Speaker"], []),
    ("Bose", "Audio", ["Bose QuietComfort 45 Headphones", "Bose SoundLink Flex Speaker"],
     ["Bose QuietComfort Ultra Earbuds"]),
    ("Sonos", "Audio", [], ["Sonos Era 100 Speaker", "Sonos Beam Gen 2 Soundbar"]),
    ("Skullcandy", "Audio", [], ["Skullcandy Crusher Evo Headphones", "Skullcandy Dime 3 Earbuds"]),
    # Home Appliances
    ("iRobot", "Home Appliances", ["iRobot Roomba i3+ EVO", "iRobot Roomba Combo j5", "iRobot Braava jet m6"], []),
    ("Dyson", "Home Appliances", ["Dyson V8 Cordless Vacuum", "Dyson Purifier Cool TP07",
                                  "Dyson Supersonic Hair Dryer"],
     ["Dyson V15 Detect Vacuum"]),
    ("Shark", "Home Appliances", ["Shark Navigator Lift-Away NV352", "Shark ION Robot Vacuum RV765"], []),
    ("Honeywell", "Home Appliances", ["Honeywell HPA300 Air Purifier", "Honeywell Turbo Force Fan"], []),
    ("eufy", "Home Appliances", [], ["eufy RoboVac 11S", "eufy Clean X8 Pro"]),
    ("Levoit", "Home Appliances", [], ["Levoit Core 300 Air Purifier", "Levoit Classic 300S Humidifier"]),
    # Kitchen  ("Pro Series Blender" / "Compact Air Fryer 4-Qt" are sold by two brands each)
    ("KitchenAid", "Kitchen", ["KitchenAid Artisan 5-Qt Stand Mixer", "KitchenAid Classic 4.5-Qt Stand Mixer",
                               "KitchenAid 7-Cup Food Processor"], []),
    ("Cuisinart", "Kitchen", ["Cuisinart 14-Cup Food Processor", "Cuisinart Coffee Center 12-Cup"], []),
    ("Oster", "Kitchen", ["Pro Series Blender", "Oster 2-Slice Toaster"], []),
    ("Hamilton Beach", "Kitchen", ["Pro Series Blender", "Hamilton Beach FlexBrew Coffee Maker"], []),
    ("Ninja", "Kitchen", ["Ninja AF101 Air Fryer 4-Qt", "Ninja Professional Blender 1000W"],
     ["Ninja CREAMi Ice Cream Maker"]),
    ("Breville", "Kitchen", [], ["Breville Barista Express", "Breville Smart Oven Air Fryer"]),
    ("Chefman", "Kitchen", [], ["Compact Air Fryer 4-Qt", "Chefman Electric Kettle"]),
    ("Dash", "Kitchen", [], ["Compact Air Fryer 4-Qt", "Dash Mini Waffle Maker"]),
    # Grocery
    ("Barilla", "Grocery", ["Barilla Spaghetti No. 5", "Barilla Penne Rigate"], []),
    ("Quaker", "Grocery", ["Quaker Old Fashioned Oats", "Quaker Chewy Granola Bars"], []),
    ("Lindt", "Grocery", ["Lindt EXCELLENCE 70% Cocoa Bar", "Lindt LINDOR Milk Chocolate Truffles"], []),
    ("Lavazza", "Grocery", ["Lavazza Super Crema Whole Bean Coffee"], []),
    ("Heinz", "Grocery", ["Heinz Tomato Ketchup", "Heinz Yellow Mustard"], []),
    ("Ghirardelli", "Grocery", [], ["Ghirardelli Dark Chocolate Squares"]),
    ("illy", "Grocery", [], ["illy Classico Whole Bean Coffee", "illy Intenso Ground Coffee"]),
    ("RXBAR", "Grocery", [], ["RXBAR Chocolate Sea Salt Protein Bars"]),
    # Personal Care
    ("Colgate", "Personal Care", ["Colgate Total Whitening Toothpaste", "Colgate 360 Manual Toothbrush"], []),
    ("Dove", "Personal Care", ["Dove Beauty Bar", "Dove Men+Care Body Wash"], []),
    ("Philips", "Personal Care", ["Philips Sonicare 4100 Toothbrush", "Philips Norelco OneBlade"], []),
    ("Olay", "Personal Care", ["Olay Regenerist Micro-Sculpting Cream"], []),
    ("CeraVe", "Personal Care", [], ["CeraVe Moisturizing Cream", "CeraVe Hydrating Facial Cleanser"]),
    ("Neutrogena", "Personal Care", [], ["Neutrogena Hydro Boost Water Gel"]),
    # Office Supplies
    ("3M", "Office Supplies", ["3M Post-it Super Sticky Notes", "3M Scotch Magic Tape",
                               "3M Command Picture Hanging Strips"], []),
    ("Sharpie", "Office Supplies", ["Sharpie Fine Point Permanent Markers", "Sharpie S-Gel Pens"], []),
    ("BIC", "Office Supplies", ["BIC Cristal Xtra Smooth Ballpoint Pens"], []),
    ("Avery", "Office Supplies", ["Avery Easy Peel Address Labels"], []),
    ("Pilot", "Office Supplies", [], ["Pilot G2 Premium Gel Pens"]),
    ("Moleskine", "Office Supplies", [], ["Moleskine Classic Hardcover Notebook"]),
    # Cleaning
    ("Clorox", "Cleaning", ["Clorox Disinfecting Wipes", "Clorox Clean-Up Cleaner + Bleach"], []),
    ("Lysol", "Cleaning", ["Lysol Disinfectant Spray", "Lysol Power Toilet Bowl Cleaner"], []),
    ("Method", "Cleaning", ["Method All-Purpose Cleaner", "Method Dish Soap"], []),
    ("OxiClean", "Cleaning", ["OxiClean Versatile Stain Remover"], []),
    ("Seventh Generation", "Cleaning", [], ["Seventh Generation Laundry Detergent",
                                            "Seventh Generation Dish Liquid"]),
    # Toys
    ("LEGO", "Toys", ["LEGO Classic Large Creative Brick Box", "LEGO Technic Bugatti Chiron"],
     ["LEGO Icons Orchid"]),
    ("Hasbro", "Toys", ["Hasbro Monopoly Classic", "Hasbro Jenga"], []),
    ("Mattel", "Toys", ["Mattel UNO Card Game", "Mattel Hot Wheels 20-Car Pack"], []),
    ("Melissa & Doug", "Toys", [], ["Melissa & Doug Wooden Building Blocks"]),
    ("PLAYMOBIL", "Toys", [], ["PLAYMOBIL City Life Hospital"]),
    # Sports & Outdoors
    ("Coleman", "Sports & Outdoors", ["Coleman Sundome 4-Person Tent", "Coleman 16-Qt Cooler"], []),
    ("YETI", "Sports & Outdoors", ["YETI Rambler Tumbler", "YETI Tundra 45 Cooler"], []),
    ("Wilson", "Sports & Outdoors", ["Wilson Evolution Basketball", "Wilson NFL Duke Football"], []),
    ("Hydro Flask", "Sports & Outdoors", [], ["Hydro Flask Wide Mouth Bottle"]),
    ("Stanley", "Sports & Outdoors", [], ["Stanley Quencher H2.0 Tumbler", "Stanley Classic Legendary Bottle"]),
    # Pet Supplies
    ("Purina", "Pet Supplies", ["Purina Pro Plan Adult Dog Food", "Purina Friskies Cat Food"], []),
    ("KONG", "Pet Supplies", ["KONG Classic Dog Toy"], []),
    ("Blue Buffalo", "Pet Supplies", ["Blue Buffalo Life Protection Dog Food"], []),
    ("Greenies", "Pet Supplies", [], ["Greenies Original Dental Dog Treats"]),
    # Refurbished: a real but rare category (~1% of rows)
    ("HP", "Refurbished", ["HP EliteBook 840 G5 14-in Laptop (Refurbished)"], []),
    ("Dyson", "Refurbished", ["Dyson V10 Animal Vacuum (Refurbished)"], []),
    ("iRobot", "Refurbished", ["iRobot Roomba 694 (Refurbished)"], []),
    ("Sony", "Refurbished", [], ["Sony WH-1000XM4 Headphones (Refurbished)"]),
    ("Lenovo", "Refurbished", [], ["Lenovo ThinkPad T480 (Refurbished)"]),
]

# Sizes are package/shipping sizes; units legitimately differ by product.
SIZE_POOLS = {
    "Electronics": ["350 g", "1.2 kg", "1.8 kg", "4.2 lb", "5.5 kg", "0.5 lb"],
    "Audio": ["250 g", "180 g", "0.6 lb", "1.2 kg", "2.4 lb"],
    "Home Appliances": ["2.6 kg", "3.1 kg", "7.5 lb", "12 lb", "4 kg"],
    "Kitchen": ["5.9 kg", "10 lb", "2.5 kg", "1.5 L", "1.7 L", "3.2 kg"],
    "Grocery": ["500 g", "1 kg", "454 g", "16 oz", "12 oz", "1 lb", "2.2 lb", "250 g", "100 g", "3.5 oz"],
    "Personal Care": ["100 mL", "4.8 oz", "3.75 oz", "400 mL", "16 fl oz", "90 g", "1 ct"],
    "Office Supplies": ["12 ct", "24 ct", "100 ct", "6 ct", "450 g"],
    "Cleaning": ["1 L", "32 fl oz", "75 ct", "500 mL", "2 L", "19 oz", "946 mL"],
    "Toys": ["1 ct", "1.2 kg", "2.1 lb", "800 g"],
    "Sports & Outdoors": ["4.5 kg", "20 oz", "600 g", "9.8 lb", "1 ct"],
    "Pet Supplies": ["15 lb", "3.5 kg", "12 kg", "340 g", "5.5 oz", "1 ct"],
    "Refurbished": ["1.6 kg", "3.4 lb", "250 g", "2.7 kg"],
}

# USD list-price ranges per category (drawn log-uniformly).
PRICE_RANGES = {
    "Electronics": (29, 1299), "Audio": (19, 449), "Home Appliances": (39, 799),
    "Kitchen": (19, 599), "Grocery": (2, 25), "Personal Care": (4, 39),
    "Office Supplies": (3, 29), "Cleaning": (3, 20), "Toys": (9, 59),
    "Sports & Outdoors": (12, 399), "Pet Supplies": (5, 79), "Refurbished": (79, 699),
}

# Typical USD price ranges by product type; first keyword found in the name wins,
# otherwise the category range above is used.
KEYWORD_PRICES = [
    ("Refurbished", 99, 549), ("Gaming Laptop", 999, 1599), ("Laptop", 399, 1199),
    ("ThinkPad", 649, 1099), ("Monitor", 129, 449), ("Printer", 149, 279), ("Mouse", 19, 59),
    ("SSD", 79, 229), ("Tablet", 129, 449), ("Tab ", 129, 449), ("TV", 249, 799),
    ("HERO", 299, 449), ("Camera", 349, 499), ("Grip", 79, 129), ("Power Bank", 19, 49),
    ("Charger", 29, 69), ("Hub", 25, 59), ("PartyBox", 299, 399), ("Soundbar", 349, 499),
    ("Headphones", 49, 399), ("Earbuds", 39, 299), ("Speaker", 39, 249),
    ("Roomba", 249, 599), ("Braava", 299, 449), ("RoboVac", 149, 299), ("Clean X8", 399, 649),
    ("Vacuum", 179, 749), ("Hair Dryer", 399, 429), ("Purifier", 99, 649), ("Fan", 19, 39),
    ("Humidifier", 59, 99), ("Stand Mixer", 279, 449), ("Food Processor", 99, 249),
    ("Coffee", 39, 129), ("Blender", 39, 129), ("Toaster", 24, 49), ("Air Fryer", 49, 129),
    ("Ice Cream", 179, 229), ("Barista", 599, 749), ("Oven", 249, 399), ("Kettle", 29, 49),
    ("Waffle", 9, 19), ("Sonicare", 49, 89), ("Toothbrush", 3, 8), ("OneBlade", 34, 49),
    ("Tent", 79, 149), ("16-Qt Cooler", 39, 59), ("Tundra", 299, 349), ("Tumbler", 25, 45), ("Bottle", 25, 45), ("Basketball", 49, 79),
    ("Football", 79, 109), ("Bugatti", 399, 449), ("Brick Box", 49, 59), ("Hospital", 59, 99),
    ("Hot Wheels", 19, 29), ("UNO", 5, 12),
    ("Dog Food", 39, 79), ("Cat Food", 12, 29),
]

# The same product name under two brands: distinct SKUs and distinct prices.
PRICE_OVERRIDES = {
    ("Oster", "Pro Series Blender"): 49.99,
    ("Hamilton Beach", "Pro Series Blender"): 39.99,
    ("Chefman", "Compact Air Fryer 4-Qt"): 59.99,
    ("Dash", "Compact Air Fryer 4-Qt"): 44.99,
}

US_CITIES_OLD = ["Springfield", "Riverside", "Franklin", "Greenville", "Madison", "Columbus",
                 "Portland", "Austin", "Denver", "Phoenix", "Raleigh", "Omaha", "Tulsa", "Boise",
                 "Tampa", "Fresno", "Dayton", "Lexington", "Reno", "Albany", "Mesa", "Plano",
                 "San Diego", "St. Louis", "Kansas City", "Salt Lake City", "Springfield"]
CA_CITIES_OLD = ["Toronto", "Vancouver", "Calgary"]
US_CITIES_NEW = ["Ann Arbor", "Fort Worth", "Chattanooga", "Spokane", "Des Moines", "Baton Rouge",
                 "Santa Fe", "Boulder", "Savannah", "Green Bay", "Little Rock", "Tucson", "Wichita"]
CA_CITIES_NEW = ["Ottawa", "Winnipeg"]

SHARE_CAD = 0.10          # Canadian stores price in CAD
CAD_PER_USD = 1.36
P_NEW_PRODUCT = 0.30      # second half: row shows a second-half-only product
P_NEW_STORE = 0.30        # second half: row is at a second-half-only store
REFURB_ROWS_PER_HALF = 10
P_DISCONTINUED = (0.12, 0.10)
P_RATING_EMPTY = (0.24, 0.30)

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
NULL_TOKENS = ["N/A", "null", "-"]


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def special_caps(text):
    """True when a word has an upper-case letter after its first character or
    starts with a lower-case letter: 'HP', 'iRobot', '5-Qt', 'gram', 'eufy'.
    Title-casing or lower-casing such a value would corrupt it."""
    for word in text.split():
        if any(c.isupper() for c in word[1:]) or word[:1].islower():
            return True
    return False


def price_str(value):
    """Retail price as a string with two decimals and a typical ending."""
    whole = max(1, math.floor(value))
    cents = rng.choice([99, 99, 99, 49, 95, 0])
    return f"{whole}.{cents:02d}"


def log_uniform(lo, hi):
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def sorted_random_dates(start, end, n):
    span = (end - start).days
    return sorted(start + timedelta(days=rng.randint(0, span)) for _ in range(n))


def typical_price(name, category):
    for keyword, lo, hi in KEYWORD_PRICES:
        if keyword in name and (category != "Grocery" or keyword != "Coffee"):
            return log_uniform(lo, hi)
    return log_uniform(*PRICE_RANGES[category])


@dataclass
class Product:
    brand: str
    name: str
    category: str
    sku: str
    size: str
    base_price: float
    new: bool             # first listed in the second half


@dataclass
class Store:
    name: str
    city: str
    country: str
    new: bool


# ---------------------------------------------------------------------------
# Build the truth
# ---------------------------------------------------------------------------

def build_products():
    products, skus = [], set()
    prefixes = {}
    suffix_base = {}  # brand -> (base code, letters used)
    for brand, category, old_names, new_names in CATALOG:
        if brand not in prefixes:
            while True:
                p = "".join(rng.choice("ABCDEFGHJKLMNPRSTVWXZ") for _ in range(2))
                if p not in prefixes.values():
                    prefixes[brand] = p
                    break
        for name, is_new in [(n, False) for n in old_names] + [(n, True) for n in new_names]:
            while True:
                r = rng.random()
                if r < 0.20:                               # all digits, leading zeros
                    sku = f"{rng.randint(1000, 99999):06d}"
                elif r < 0.45:                             # plain code
                    sku = f"{prefixes[brand]}-{rng.randint(1000, 9999)}"
                elif brand in suffix_base and rng.random() < 0.5:
                    base, used = suffix_base[brand]        # sibling: same base, next letter
                    letter = next(c for c in "abcdefghjkmnpx" if c not in used)
                    used.add(letter)
                    sku = f"{base}-{letter}"
                else:
                    base = f"{prefixes[brand]}-{rng.randint(1000, 9999)}"
                    letter = rng.choice("abcdkx")
                    suffix_base[brand] = (base, {letter})
                    sku = f"{base}-{letter}"
                if sku not in skus:
                    skus.add(sku)
                    break
            base_price = PRICE_OVERRIDES.get((brand, name)) or typical_price(name, category)
            products.append(Product(brand, name, category, sku, rng.choice(SIZE_POOLS[category]),
                                    base_price, is_new))
    return products


def build_stores():
    numbers = rng.sample(range(100, 900), len(US_CITIES_OLD) + len(CA_CITIES_OLD))
    numbers += rng.sample(range(900, 1400), len(US_CITIES_NEW) + len(CA_CITIES_NEW))
    specs = ([(c, "US", False) for c in US_CITIES_OLD] + [(c, "CA", False) for c in CA_CITIES_OLD]
             + [(c, "US", True) for c in US_CITIES_NEW] + [(c, "CA", True) for c in CA_CITIES_NEW])
    return [Store(f"Store #{num:04d} - {city}", city, country, new)
            for num, (city, country, new) in zip(numbers, specs)]


def build_truth(products, stores):
    regular = [p for p in products if p.category != "Refurbished"]
    refurb = [p for p in products if p.category == "Refurbished"]
    dates = (sorted_random_dates(date(2023, 1, 3), date(2023, 12, 29), HALF)
             + sorted_random_dates(date(2024, 1, 2), date(2024, 12, 30), HALF))
    refurb_rows = set(rng.sample(range(HALF), REFURB_ROWS_PER_HALF)) | \
        {HALF + i for i in rng.sample(range(HALF), REFURB_ROWS_PER_HALF)}

    rows, meta, pairs = [], [], set()
    listing_no = 204000
    for i, listed in enumerate(dates):
        half = 0 if i < HALF else 1
        want_new_product = half == 1 and rng.random() < P_NEW_PRODUCT
        want_new_store = half == 1 and rng.random() < P_NEW_STORE
        while True:                       # redraw until the (product, store) pair is new
            if i in refurb_rows:
                pool = [p for p in refurb if half == 1 or not p.new]
            else:
                pool = [p for p in regular if p.new == want_new_product]
            product = rng.choice(pool)
            country = "CA" if rng.random() < SHARE_CAD else "US"
            store = rng.choice([s for s in stores if s.country == country and s.new == want_new_store])
            if (product.sku, store.name) not in pairs:
                pairs.add((product.sku, store.name))
                break

        listing_no += rng.randint(1, 9)
        factor = rng.uniform(0.92, 1.08) * (CAD_PER_USD if store.country == "CA" else 1.0)
        if (product.brand, product.name) in PRICE_OVERRIDES and store.country == "US":
            price = f"{product.base_price:.2f}"          # the two-brand products keep list price
        else:
            price = price_str(product.base_price * factor)

        discontinued = ""
        if rng.random() < P_DISCONTINUED[half]:
            d = listed + timedelta(days=rng.randint(20, 400))
            discontinued = d.isoformat() if d <= EXPORT_DATE else ""
        if discontinued:
            in_stock = "false" if rng.random() < 0.85 else "true"
        else:
            in_stock = "true" if rng.random() < 0.82 else "false"
        rating = "" if rng.random() < P_RATING_EMPTY[half] else f"{rng.triangular(1.0, 5.0, 4.4):.1f}"

        rows.append({
            "listing_id": f"LST-{listing_no}",
            "sku": product.sku,
            "brand": product.brand,
            "product_name": product.name,
            "category": product.category,
            "size": product.size,
            "price": price,
            "currency": "CAD" if store.country == "CA" else "USD",
            "in_stock": in_stock,
            "store": store.name,
            "store_city": store.city,
            "listed_on": listed.isoformat(),
            "discontinued_on": discontinued,
            "rating": rating,
        })
        meta.append((product, store))
    return rows, meta


# ---------------------------------------------------------------------------
# Dirt
# ---------------------------------------------------------------------------

def pad_whitespace(v):
    return rng.choice([f" {v}", f"{v} ", f"  {v}", f"{v}  ", f" {v} "])


def case_slip(v):
    return rng.choice([x for x in (v.lower(), v.upper()) if x != v])


def price_dollar(v):
    return "$" + v


def price_comma(v):
    return v.replace(".", ",")


def price_three_decimals(v):
    return v + "0"


def in_stock_token(v):
    return rng.choice(["yes", "Y", "1", "TRUE"] if v == "true" else ["no", "N", "0", "FALSE"])


def date_us_slash(v):
    return date.fromisoformat(v).strftime("%m/%d/%Y")


def date_month_name(v):
    d = date.fromisoformat(v)
    return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"


def null_token(_v):
    return rng.choice(NULL_TOKENS)


UNIT_ALT_SPELLING = {"g": ["gr", "gms"], "kg": ["kgs", "Kg"], "lb": ["lbs"], "oz": ["oz.", "ozs"],
                     "fl oz": ["fl. oz", "floz"], "L": ["ltr", "Ltr"], "mL": ["ml", "mls"],
                     "ct": ["count", "pcs"]}


def size_slip(v):
    number, unit = v.split(" ", 1)
    return rng.choice([number + unit,                                   # "500g"
                       f"{number} {case_slip(unit)}",                   # "500 G"
                       f"{number} {rng.choice(UNIT_ALT_SPELLING[unit])}"])  # "500 gr"


def make_typo(word, taken):
    """Swap, drop or double one letter (never a word's first); result must not be a real value."""
    positions = [i for i, c in enumerate(word) if c.isalpha() and i > 0 and word[i - 1].isalpha()]
    for _ in range(200):
        op = rng.choice(["swap", "drop", "double"])
        i = rng.choice(positions)
        if op == "swap":
            if i + 1 >= len(word) or not word[i + 1].isalpha() or word[i] == word[i + 1]:
                continue
            typo = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        elif op == "drop":
            typo = word[:i] + word[i + 1:]
        else:
            typo = word[:i] + word[i] + word[i:]
        if typo.lower() not in taken:
            return typo, op
    raise RuntimeError(f"no typo for {word!r}")


def half_of(i):
    return 0 if i < HALF else 1


def inject_dirt(truth):
    dirty = [dict(r) for r in truth]
    kind_of = {}                                   # (row, column) -> dirt kind
    counts = defaultdict(lambda: [0, 0])
    examples = {}
    typo_values = defaultdict(lambda: [[], []])    # kind -> per half [(truth, typo, n_rows)]

    shared_names = {n for n, brands in names_to_brands(truth).items() if len(brands) > 1}

    def brand_ok(r):      # trap brands and two-brand product rows stay untouched
        return not special_caps(r["brand"]) and r["product_name"] not in shared_names

    def category_ok(r):
        return r["category"] != "Refurbished"

    def price_ok(r):
        return r["product_name"] not in shared_names

    def put(i, col, value, kind):
        assert value != truth[i][col] and (i, col) not in kind_of
        dirty[i][col] = value
        kind_of[(i, col)] = kind
        counts[kind][half_of(i)] += 1
        examples.setdefault(kind, (truth[i][col], value))

    # Typos first: a few values per half, each on 1-3 rows; different values per half.
    for kind, col, eligible in [("brand_typo", "brand", brand_ok), ("category_typo", "category", category_ok)]:
        taken = {r[col].lower() for r in truth}
        used_values = set()
        for half in (0, 1):
            rows_by_value = defaultdict(list)
            for i in range(half * HALF, (half + 1) * HALF):
                if eligible(truth[i]):
                    rows_by_value[truth[i][col]].append(i)
            candidates = sorted(v for v, rs in rows_by_value.items() if len(rs) >= 3 and v not in used_values)
            for value in rng.sample(candidates, 3):
                used_values.add(value)
                typo, _op = make_typo(value, taken)
                n = rng.randint(1, 3)
                for i in sorted(rng.sample(rows_by_value[value], n)):
                    put(i, col, typo, kind)
                typo_values[kind][half].append((value, typo, n))

    # Everything else: an exact number of cells per half, sampled from eligible rows.
    plan = [
        # kind,                        column,            (1st, 2nd), eligible,                          transform
        ("brand_whitespace",           "brand",           (45, 55),  brand_ok,                          pad_whitespace),
        ("category_whitespace",        "category",        (50, 60),  category_ok,                       pad_whitespace),
        ("category_case",              "category",        (60, 70),  category_ok,                       case_slip),
        ("store_city_whitespace",      "store_city",      (0, 80),   lambda r: True,                    pad_whitespace),
        ("store_city_case",            "store_city",      (55, 65),  lambda r: True,                    case_slip),
        ("price_dollar_sign",          "price",           (40, 45),  price_ok,                          price_dollar),
        ("price_decimal_comma",        "price",           (0, 50),   price_ok,                          price_comma),
        ("price_three_decimals",       "price",           (35, 30),  price_ok,                          price_three_decimals),
        ("in_stock_token",             "in_stock",        (180, 200), lambda r: True,                   in_stock_token),
        ("listed_on_us_slash",         "listed_on",       (80, 70),  lambda r: True,                    date_us_slash),
        ("listed_on_month_name",       "listed_on",       (0, 70),   lambda r: True,                    date_month_name),
        ("rating_null_token",          "rating",          (90, 110), lambda r: r["rating"] == "",       null_token),
        ("discontinued_on_null_token", "discontinued_on", (0, 150),  lambda r: r["discontinued_on"] == "", null_token),
        ("size_unit_slip",             "size",            (90, 110), lambda r: True,                    size_slip),
    ]
    for kind, col, per_half, eligible, transform in plan:
        for half, n in enumerate(per_half):
            pool = [i for i in range(half * HALF, (half + 1) * HALF)
                    if (i, col) not in kind_of and eligible(truth[i])]
            for i in sorted(rng.sample(pool, n)):
                put(i, col, transform(truth[i][col]), kind)
        counts[kind]  # make sure zero-count kinds are listed

    kind_columns = {"brand_typo": "brand", "category_typo": "category"}
    kind_columns.update({k: c for k, c, *_ in plan})
    return dirty, kind_of, counts, examples, typo_values, kind_columns


def names_to_brands(rows):
    m = defaultdict(set)
    for r in rows:
        m[r["product_name"]].add(r["brand"])
    return m


# ---------------------------------------------------------------------------
# Traps (legitimate values that must survive cleaning)
# ---------------------------------------------------------------------------

def trap_rules(truth):
    units = Counter(r["size"].split(" ", 1)[1] for r in truth)
    top_unit = units.most_common(1)[0][0]
    shared = {n for n, b in names_to_brands(truth).items() if len(b) > 1}
    # name, column, description, rule on the truth row, strict (every matching cell untouched)
    return top_unit, [
        ("sku_suffix_letter", "sku", "SKU ends in a lower-case letter (`AB-1043-x`); the letter distinguishes products",
         lambda r: re.fullmatch(r"[A-Z]{2}-\d{4}-[a-z]", r["sku"]) is not None, True),
        ("sku_leading_zeros", "sku", "all-digit SKU with leading zeros (`004512`)",
         lambda r: r["sku"].isdigit() and r["sku"].startswith("0"), True),
        ("brand_capitalization", "brand", "brand with non-title capitalization (HP, LG, 3M, JBL, iRobot, GoPro, KitchenAid, eufy, illy, ...)",
         lambda r: special_caps(r["brand"]), True),
        ("product_name_capitalization", "product_name", "name with a word a title-caser would change (`5-Qt`, `HERO12`, `iRobot`, `gram`, ...)",
         lambda r: special_caps(r["product_name"]), True),
        ("category_refurbished", "category", "rare but real category `Refurbished`",
         lambda r: r["category"] == "Refurbished", True),
        ("currency_cad", "currency", "`CAD` (Canadian stores); real, not a typo of USD",
         lambda r: r["currency"] == "CAD", True),
        ("product_name_two_brands", "product_name", "same product name sold by two brands with different SKUs/prices (`Pro Series Blender`, `Compact Air Fryer 4-Qt`); brand and price on these rows are untouched too",
         lambda r: r["product_name"] in shared, True),
        ("size_other_units", "size", f"size in a unit other than the most common one (`{top_unit}`); units must not be made uniform (untouched cells only)",
         lambda r: r["size"].split(" ", 1)[1] != top_unit, False),
        ("discontinued_on_empty", "discontinued_on", "empty = not discontinued; must stay empty (untouched cells only)",
         lambda r: r["discontinued_on"] == "", False),
        ("rating_empty", "rating", "empty = no rating; must stay empty (untouched cells only)",
         lambda r: r["rating"] == "", False),
    ]


def count_traps(truth, dirty):
    top_unit, rules = trap_rules(truth)
    result = []
    for name, col, desc, rule, strict in rules:
        per_half = [0, 0]
        for i, (t, d) in enumerate(zip(truth, dirty)):
            if rule(t):
                if strict:
                    assert d[col] == t[col], (name, i)
                if d[col] == t[col]:
                    per_half[half_of(i)] += 1
        result.append((name, col, desc, per_half))
    return result


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def novelty_stats(truth, meta):
    first = {"brand": set(), "product": set(), "store": set()}
    for r in truth[:HALF]:
        first["brand"].add(r["brand"])
        first["product"].add((r["brand"], r["product_name"]))
        first["store"].add(r["store"])
    second = {"brand": set(), "product": set(), "store": set()}
    rows_new = Counter()
    for r in truth[HALF:]:
        keys = {"brand": r["brand"], "product": (r["brand"], r["product_name"]), "store": r["store"]}
        any_new = False
        for k, v in keys.items():
            second[k].add(v)
            if v not in first[k]:
                rows_new[k] += 1
                any_new = True
        rows_new["any"] += any_new
    return {k: (len(second[k]), len(second[k] - first[k]), rows_new[k]) for k in first}, rows_new["any"]


def write_notes(path, truth, counts, examples, typo_values, kind_columns, traps, novelty, any_new):
    total = [sum(c[h] for c in counts.values()) for h in (0, 1)]
    cells_half = HALF * len(COLUMNS)
    L = []
    L.append("# catalog: clean/dirty pair (retail product catalog export)\n")
    L.append("Generated by `../gen_catalog.py` (standard library only, seed "
             f"{SEED}); rerunning reproduces both files byte for byte.\n")
    L.append(f"- `clean.csv`: the truth, {N_ROWS} rows x {len(COLUMNS)} columns, ordered by `listed_on` "
             "(first half: 2023, second half: 2024).")
    L.append("- `dirty.csv`: same header, shape and row order; dirt injected into a copy of the truth. "
             "Each dirty cell carries exactly one dirt kind.")
    L.append(f"- First half = rows 1-{HALF}, second half = rows {HALF + 1}-{N_ROWS} "
             "(data rows, header not counted).\n")
    L.append("## Second half novelty\n")
    L.append("| entity | distinct in 2nd half | of which unseen in 1st half | 2nd-half rows holding an unseen one |")
    L.append("|---|---|---|---|")
    for k, (n, new, rows) in novelty.items():
        L.append(f"| {k} | {n} | {new} ({new / n:.0%}) | {rows} |")
    L.append(f"\nSecond-half rows with at least one unseen brand, product or store: {any_new} of {HALF}.\n")

    L.append("## Dirt kinds (dirty cells per half)\n")
    L.append("| kind | column | example (truth -> dirty) | rows 1-1000 | rows 1001-2000 |")
    L.append("|---|---|---|---|---|")
    for kind in counts:
        ex = examples.get(kind)
        ex_txt = f"`{ex[0]!r}` -> `{ex[1]!r}`" if ex else ""
        c = counts[kind]
        L.append(f"| {kind} | {kind_columns[kind]} | {ex_txt} | {c[0]} | {c[1]} |")
    L.append(f"| **total** | | | **{total[0]}** ({total[0] / cells_half:.1%} of cells) "
             f"| **{total[1]}** ({total[1] / cells_half:.1%} of cells) |")
    overall = sum(total) / (N_ROWS * len(COLUMNS))
    L.append(f"\nOverall: {sum(total)} dirty cells of {N_ROWS * len(COLUMNS)} ({overall:.1%}).")
    L.append("Kinds only in the second half: "
             + ", ".join(k for k, c in counts.items() if c[0] == 0 and c[1] > 0) + ".\n")
    L.append("Variants used:")
    L.append("- whitespace: leading and/or trailing spaces (1-2).")
    L.append("- case slips: whole value lower-cased or upper-cased.")
    L.append("- price: `$19.99`, `19,99` (second half only), `19.990`.")
    L.append("- in_stock: `yes`/`Y`/`1`/`TRUE` for true, `no`/`N`/`0`/`FALSE` for false.")
    L.append("- listed_on: `03/05/2024` (mm/dd/yyyy), `Mar 5, 2024` (second half only).")
    L.append("- null tokens `N/A`, `null`, `-` only where the truth is empty.")
    L.append("- size: space dropped (`500g`), unit case (`500 G`, `1.5 l`), unit spelling (`500 gr`, `2 lbs`, `1 L`->`1 ltr`).\n")
    L.append("Typos (swapped, dropped or doubled letter; different values per half):\n")
    L.append("| kind | half | truth -> typo (rows) |")
    L.append("|---|---|---|")
    for kind, halves in typo_values.items():
        for h, items in enumerate(halves):
            txt = ", ".join(f"`{t}` -> `{y}` ({n})" for t, y, n in items)
            L.append(f"| {kind} | {'1st' if h == 0 else '2nd'} | {txt} |")

    L.append("\n## Traps (legitimate values; identical in clean and dirty)\n")
    L.append("Counts are cells that hold the trap value in both files. For the first seven "
             "every such cell is untouched (checked by the generator); for sizes and empty "
             "cells some cells of the same kind received dirt, and only the untouched ones are counted.\n")
    L.append("| trap | column | what | rows 1-1000 | rows 1001-2000 |")
    L.append("|---|---|---|---|---|")
    for name, col, desc, per_half in traps:
        L.append(f"| {name} | {col} | {desc} | {per_half[0]} | {per_half[1]} |")
    L.append("")
    path.write_text("\n".join(L), encoding="utf-8")


def main():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    products = build_products()
    stores = build_stores()
    truth, meta = build_truth(products, stores)
    dirty, kind_of, counts, examples, typo_values, kind_columns = inject_dirt(truth)

    # Sanity: every differing cell is logged, every logged cell differs.
    diffs = {(i, c) for i, (t, d) in enumerate(zip(truth, dirty)) for c in COLUMNS if t[c] != d[c]}
    assert diffs == set(kind_of), "dirt log does not match the diff"
    assert len({r["listing_id"] for r in truth}) == N_ROWS
    assert [r["listed_on"] for r in truth] == sorted(r["listed_on"] for r in truth)
    two_brand = [n for n, b in names_to_brands(truth[:HALF]).items() if len(b) > 1]
    assert "Pro Series Blender" in two_brand

    traps = count_traps(truth, dirty)
    novelty, any_new = novelty_stats(truth, meta)

    write_csv(OUT_DIR / "clean.csv", truth)
    write_csv(OUT_DIR / "dirty.csv", dirty)
    write_notes(OUT_DIR / "NOTES.md", truth, counts, examples, typo_values, kind_columns,
                traps, novelty, any_new)

    print(f"wrote {OUT_DIR / 'clean.csv'}, {OUT_DIR / 'dirty.csv'}, {OUT_DIR / 'NOTES.md'}")
    print(f"\n{'dirt kind':30} {'rows 1-1000':>12} {'rows 1001-2000':>15}")
    for kind, c in counts.items():
        print(f"{kind:30} {c[0]:>12} {c[1]:>15}")
    total = [sum(c[h] for c in counts.values()) for h in (0, 1)]
    print(f"{'TOTAL':30} {total[0]:>12} {total[1]:>15}   "
          f"({sum(total) / (N_ROWS * len(COLUMNS)):.1%} of all cells)")
    print(f"\n{'trap':30} {'rows 1-1000':>12} {'rows 1001-2000':>15}")
    for name, _col, _desc, per_half in traps:
        print(f"{name:30} {per_half[0]:>12} {per_half[1]:>15}")
    print("\nsecond-half novelty (distinct, unseen in 1st half, rows):",
          {k: v for k, v in novelty.items()}, "rows with any unseen:", any_new)


if __name__ == "__main__":
    main()
