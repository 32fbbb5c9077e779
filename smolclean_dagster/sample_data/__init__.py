"""Demo drops shipped with the package (messy on purpose); `make_sample.py` regenerates them."""

from pathlib import Path

SAMPLE_DATA_DIR = Path(__file__).parent
CUSTOMERS_CSV = SAMPLE_DATA_DIR / "customers.csv"
ORDERS_JSONL = SAMPLE_DATA_DIR / "orders.jsonl"

__all__ = ["CUSTOMERS_CSV", "ORDERS_JSONL", "SAMPLE_DATA_DIR"]
