"""Dirty/clean pairs of our own, built from the published clean files, for the harm a module can do to rows
of entities: the damage a module must not do on the next drop.

Run: `python benchmarks/entity_pairs.py [--out DIR] [--shapes copied_values ...] [--run]`.

Each shape starts from a clean file of ../shared/benchmarks/data (read there, never copied into this
repository), so the truth is known: `clean.csv` is that file, reordered or with a real change that both
files carry, and `dirty.csv` is the same rows with the damage injected. Both keep the source's index column.
The pairs go to `DIR/<shape>/` (default: a new temporary folder named `entity_pairs`), the layout
`benchmarks/quality.py --data DIR` reads; `--run` then scores them with it, whole file and next drop (learned
from the first half of the rows, the second half cleaned), into `benchmarks/results/entity_pairs.json`.

- `copied_values` (hospital): 3% of the rows hold another hospital's City, ZipCode and PhoneNumber, the rest
  of the row its own; 2% typos in the other rows. A module must put the row's own values back, or leave them:
  what it must never do is read the copied cells as the row's identity and write more of the other
  hospital's values (its address, its county) into the row.
- `shared_name` (hospital): one HospitalName is shared by three hospitals in three cities (true in both
  files), with 2% typos in City, ZipCode and PhoneNumber. A module that trusts the name as a key writes one
  hospital's city, zip code and phone over the other two.
- `wrong_key` (hospital): in 2% of the rows the ProviderNumber is another hospital's, the rest of the row is
  right. A module that trusts the key rewrites the row's right values to the other hospital's; the only
  right repair is the key itself.
- `new_entities` (beers): rows sorted by brewery_id, so the second half holds breweries the first never saw;
  2% typos and case slips in city and state. Tables learned from the first half do not know the second
  half's breweries: a module must leave their values alone, not map them to a known brewery's.
- `by_time` (flights): rows sorted by scheduled departure (the file has no date: every flight is of one day),
  so the next drop holds the later flights; 2% typos in the four time columns.
In the hospital shapes the file is two drops that both list every hospital: the first half of each
hospital's rows, then the rest, each hospital's rows together as in the published file (whose second half
holds hospitals the first never saw; shuffled rows hide the dirt from detectors that read 50-row chunks).
A typo replaces a letter or digit by another of its kind, drops one, or swaps two neighbours; a case slip
writes the value in lower, upper or title case. The seed is fixed: the same command writes the same pairs.
"""

from __future__ import annotations

import argparse
import random
import shlex
import string
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO  # noqa: E402
from quality import DATA, _time, read_text_frame  # noqa: E402

SEED = 20261127
#: A hospital's own contact cells: what `copied_values` copies from another hospital.
CONTACT = ["City", "ZipCode", "PhoneNumber"]
#: The hospital's descriptive cells where `copied_values` puts its usual dirt.
HOSPITAL_TEXT = ["HospitalName", "Address1", "City", "ZipCode", "CountyName", "PhoneNumber"]
TIMES = ["sched_dep_time", "act_dep_time", "sched_arr_time", "act_arr_time"]


# ---------------------------------------------------------------------------------------------- damage

def typo(value: str, rng: random.Random) -> str:
    """One slip of the keyboard: a letter or digit replaced by another of its kind, dropped, or swapped with
    its neighbour ("birmingham" -> "birmingahm", "35233" -> "3523")."""
    spots = [i for i, ch in enumerate(value) if ch.isalnum()]
    while True:
        i, kind = rng.choice(spots), rng.choice(("replace", "drop", "swap"))
        if kind == "replace":
            return value[:i] + _same_kind(value[i], rng) + value[i + 1:]
        if kind == "drop" and len(spots) > 1:
            return value[:i] + value[i + 1:]
        if kind == "swap" and i + 1 in spots and value[i] != value[i + 1]:
            return value[:i] + value[i + 1] + value[i] + value[i + 2:]


def _same_kind(ch: str, rng: random.Random) -> str:
    pool = string.digits if ch.isdigit() else string.ascii_uppercase if ch.isupper() else string.ascii_lowercase
    return rng.choice(pool.replace(ch, ""))


def case_slip(value: str, rng: random.Random) -> str:
    """The value in another case ("Bend" -> "bend" or "BEND", "OR" -> "Or")."""
    return rng.choice(sorted({value.lower(), value.upper(), value.title()} - {value}))


def damage_cells(dirty: pd.DataFrame, clean: pd.DataFrame, columns: list[str], share: float,
                 rng: random.Random, how=typo, rows=None) -> None:
    """Damage `share` of the cells of `columns` (in the positions `rows`, default all) with `how`, choosing
    among the cells still clean that hold a letter or digit (a second slip never lands on the first)."""
    rows = range(len(dirty)) if rows is None else rows
    cells = [(i, j) for j in map(dirty.columns.get_loc, columns) for i in rows
             if dirty.iat[i, j] == clean.iat[i, j] and any(ch.isalnum() for ch in dirty.iat[i, j])]
    for i, j in rng.sample(cells, min(len(cells), round(share * len(columns) * len(rows)))):
        dirty.iat[i, j] = how(dirty.iat[i, j], rng)


# ---------------------------------------------------------------------------------------------- shapes

def copied_values(rng: random.Random) -> tuple[pd.DataFrame, pd.DataFrame]:
    """3% of the rows with another hospital's City, ZipCode and PhoneNumber; 2% typos in the other rows."""
    clean = _two_drops(_read("hospital"))
    dirty = clean.copy()
    contacts = clean.drop_duplicates("ProviderNumber").set_index("ProviderNumber")[CONTACT]
    copied = _some_rows(clean, 0.03, rng)
    for i in copied:
        donor = rng.choice([p for p in contacts.index if p != clean.at[i, "ProviderNumber"]])
        dirty.loc[i, CONTACT] = contacts.loc[donor].to_numpy()
    others = sorted(set(range(len(clean))) - set(copied))
    damage_cells(dirty, clean, HOSPITAL_TEXT, 0.02, rng, rows=others)
    return clean, dirty


def shared_name(rng: random.Random) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One HospitalName shared by three hospitals in three cities (in both files); 2% typos in City, ZipCode
    and PhoneNumber."""
    clean = _read("hospital")
    hospitals = clean.groupby("ProviderNumber").filter(lambda rows: len(rows) >= 20).drop_duplicates("ProviderNumber")
    hospitals = hospitals.sample(frac=1, random_state=rng.randrange(2**32)).drop_duplicates("City").head(3)
    clean.loc[clean.ProviderNumber.isin(hospitals.ProviderNumber), "HospitalName"] = hospitals.HospitalName.iloc[0]
    clean = _two_drops(clean)
    dirty = clean.copy()
    damage_cells(dirty, clean, CONTACT, 0.02, rng)
    return clean, dirty


def wrong_key(rng: random.Random) -> tuple[pd.DataFrame, pd.DataFrame]:
    """2% of the rows with another hospital's ProviderNumber, every other cell right."""
    clean = _two_drops(_read("hospital"))
    dirty = clean.copy()
    keys = sorted(clean.ProviderNumber.unique())
    for i in _some_rows(clean, 0.02, rng):
        dirty.at[i, "ProviderNumber"] = rng.choice([k for k in keys if k != clean.at[i, "ProviderNumber"]])
    return clean, dirty


def new_entities(rng: random.Random) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Beers by brewery, so the second half's breweries are new; 1% typos and 1% case slips in city and state."""
    clean = _read("beers")
    clean = clean.sort_values("brewery_id", key=lambda ids: ids.astype(int), kind="stable", ignore_index=True)
    dirty = clean.copy()
    damage_cells(dirty, clean, ["city", "state"], 0.01, rng)
    damage_cells(dirty, clean, ["city", "state"], 0.01, rng, how=case_slip)
    return clean, dirty


def by_time(rng: random.Random) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Flights by scheduled departure (a flight's rows together), so the second half is later; 2% typos in
    the times."""
    clean = _read("flights")
    departs = clean.sched_dep_time.map(lambda v: _time(v) or (24, 0, 0))  # none unreadable in the clean file
    clean = clean.assign(_at=departs).sort_values(["_at", "flight"], kind="stable", ignore_index=True).drop(columns="_at")
    dirty = clean.copy()
    damage_cells(dirty, clean, TIMES, 0.02, rng)
    return clean, dirty


SHAPES = {f.__name__: f for f in (copied_values, shared_name, wrong_key, new_entities, by_time)}


def _read(dataset: str) -> pd.DataFrame:
    return read_text_frame(DATA / dataset / "clean.csv")


def _two_drops(hospital: pd.DataFrame) -> pd.DataFrame:
    """The first half of every hospital's rows, then the rest, in the file's order within each half."""
    hospitals = hospital.groupby("ProviderNumber")
    later = hospitals.cumcount() * 2 >= hospitals.ProviderNumber.transform("size")
    return hospital.loc[later.sort_values(kind="stable").index].reset_index(drop=True)


def _some_rows(frame: pd.DataFrame, share: float, rng: random.Random) -> list[int]:
    return sorted(rng.sample(range(len(frame)), round(share * len(frame))))


# ---------------------------------------------------------------------------------------------- command line

def write_pairs(out: Path, shapes: list[str]) -> None:
    """Write `out/<shape>/clean.csv` and `dirty.csv` for every shape, and say what each holds."""
    for shape in shapes:
        clean, dirty = SHAPES[shape](random.Random(f"{SEED}:{shape}"))
        folder = out / shape
        folder.mkdir(parents=True, exist_ok=True)
        clean.to_csv(folder / "clean.csv", index=False)
        dirty.to_csv(folder / "dirty.csv", index=False)
        damaged = (dirty != clean).sum()
        by_column = ", ".join(f"{c} {n}" for c, n in damaged[damaged > 0].items())
        print(f"{shape}: {len(clean)} rows, {damaged.sum()} damaged cells ({by_column})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the pairs, outside the repository (default: a new temporary folder)")
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES), help="default: all")
    parser.add_argument("--run", action="store_true",
                        help="score the pairs with benchmarks/quality.py into benchmarks/results/entity_pairs.json")
    args = parser.parse_args(argv)
    out = (args.out or Path(tempfile.mkdtemp(prefix="smolclean-")) / "entity_pairs").resolve()
    if out.is_relative_to(REPO):
        parser.error(f"--out {out} is inside the repository: write the pairs outside it")
    write_pairs(out, args.shapes)
    command = [sys.executable, str(Path(__file__).with_name("quality.py")), "--data", str(out),
               "--datasets", *args.shapes, "--name", "entity_pairs"]
    print(f"pairs in {out}")
    if not args.run:
        print(f"score them: {shlex.join(command)}")
        return 0
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
