"""Pricing: token usage → US dollars, from a dated price table (docs/guides/spend.md).

What belongs here: the table's format (`metaharness.prices/1`, TOML: `taken`, then one row per
model with `provider` and $ per million `input`, `output`, `cache_read`, `cache_write` tokens),
the shipped table (`prices.toml` beside this module), a user file laid over it (`--prices FILE`,
else `METAHARNESS_PRICES`), the lookup of a model name, and `Meter`: one run's spend against its
cap (`--max-cost-usd`).

Rules it keeps: pricing is pure arithmetic on the counts given (a missing count is 0); a model is
found by its exact name, else by the longest row name it begins with followed by `-` (dated ids),
after a provider prefix (`anthropic/`, `models/`) is dropped, else by a `"*"` row the user wrote; a
model with no row has no price (None), never a guessed one; the meter is told each response after it was answered and says
whether the next request may be forwarded — once the spend reaches the cap, or an answer could
not be priced under a cap, no further request is.
"""

from __future__ import annotations

import os
import threading
import tomllib
from msgspec import Struct, field
from typing import Any, Callable

PRICES_FORMAT = "metaharness.prices/1"
PRICES_ENV = "METAHARNESS_PRICES"
ANY_MODEL = "*"  # a row a user file may give for every model no other row names (the shipped table has none)
COLUMNS = ("input", "output", "cache_read", "cache_write")
# The usage keys (metaharness.event/1 `Usage`) each column prices.
USAGE_COLUMN = {"input_tokens": "input", "output_tokens": "output",
                "cache_read_input_tokens": "cache_read", "cache_creation_input_tokens": "cache_write"}
# A vendor's own cost and metaharness's may differ by this much before a run says so.
TOLERANCE_RELATIVE = 0.05
TOLERANCE_ABSOLUTE_USD = 0.0001


class PricesError(ValueError):
    """A price file that cannot be used; the message names the file and the row."""


class Price(Struct, frozen=True):
    model: str
    provider: str
    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, usage: dict[str, Any]) -> float:
        """USD for one response's token counts (keys as in `USAGE_COLUMN`; None or missing is 0)."""
        return sum((usage.get(key) or 0) * getattr(self, column) for key, column in USAGE_COLUMN.items()) / 1e6


class PriceTable(Struct, frozen=True):
    taken: str
    rows: dict[str, Price]
    source: str = "shipped"

    def lookup(self, model: str | None) -> Price | None:
        if not model:
            return None
        name = model.rsplit("/", 1)[-1].strip().lower()
        if name in self.rows:
            return self.rows[name]
        best = max((row for row in self.rows if name.startswith(row + "-")), key=len, default=None)
        return self.rows[best] if best is not None else self.rows.get(ANY_MODEL)

    def cost(self, model: str | None, usage: dict[str, Any]) -> float | None:
        price = self.lookup(model)
        return None if price is None else price.cost(usage)

    def over(self, other: "PriceTable") -> "PriceTable":
        """`other`'s rows laid over this table's; `other`'s date."""
        return PriceTable(taken=other.taken, rows={**self.rows, **other.rows}, source=other.source)


def parse_prices(text: str, source: str) -> PriceTable:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PricesError(f"the price file {source} is not TOML: {exc}") from None
    if raw.get("format") != PRICES_FORMAT:
        raise PricesError(f'the price file {source} needs format = "{PRICES_FORMAT}"')
    taken = raw.get("taken")
    if not isinstance(taken, str) or not taken:
        raise PricesError(f"the price file {source} needs `taken`, the date its prices were taken")
    models = raw.get("models", {})
    if not isinstance(models, dict):
        raise PricesError(f"the price file {source}: `models` must be a table of models")
    rows: dict[str, Price] = {}
    for name, row in models.items():
        if not isinstance(row, dict):
            raise PricesError(f"the price file {source}: model {name!r} is not a table")
        values = {}
        for column in COLUMNS:
            value = row.get(column, 0.0 if column.startswith("cache") else None)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise PricesError(f"the price file {source}: model {name!r} needs {column} "
                                  f"as a number of dollars per million tokens, at least 0")
            values[column] = float(value)
        rows[name.lower()] = Price(model=name.lower(), provider=str(row.get("provider", "")), **values)
    return PriceTable(taken=taken, rows=rows, source=source)


def shipped_prices() -> PriceTable:
    # Every run reads this table at start: read beside this file where it is one (any
    # install but a zipped one), since importing importlib.resources (tempfile, zipfile,
    # ...) cost more start-up than the read; importlib.resources only where it is not.
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prices.toml")
    if os.path.isfile(beside):
        with open(beside, encoding="utf-8") as handle:
            return parse_prices(handle.read(), "shipped")
    from importlib import resources

    return parse_prices(resources.files(__package__).joinpath("prices.toml").read_text(), "shipped")


def load_prices(path: str | None = None, environ: dict[str, str] | None = None) -> PriceTable:
    """The shipped table, with the user's file (`path`, else `METAHARNESS_PRICES`) laid over it."""
    path = path or (environ if environ is not None else os.environ).get(PRICES_ENV) or None
    table = shipped_prices()
    if path is None:
        return table
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise PricesError(f"the price file {path} could not be read: {exc.strerror or exc}") from None
    return table.over(parse_prices(text, path))


def disagrees(metered: float, reported: float) -> bool:
    """Do two costs of the same traffic differ beyond the stated tolerance?"""
    return abs(metered - reported) > max(TOLERANCE_ABSOLUTE_USD, TOLERANCE_RELATIVE * max(metered, reported))


class Charge(Struct):
    """One priced response. `cost_usd` None: the model has no row in the table."""

    model: str | None
    usage: dict[str, Any]
    cost_usd: float | None


class Meter(Struct):
    """One run's spend. `on_charge(charge)` is called after every response is priced (from
    whatever thread served it); `refusal()` is the sentence to answer a request with once the
    run may spend no more, else None."""

    prices: PriceTable
    cap_usd: float | None = None
    on_charge: Callable[[Charge], None] = lambda charge: None
    spent_usd: float = 0.0
    responses: int = 0
    unpriced: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def charge(self, model: str | None, usage: dict[str, Any]) -> Charge:
        cost = self.prices.cost(model, usage)
        with self._lock:
            self.responses += 1
            if cost is None:
                self.unpriced.append(str(model))
            else:
                self.spent_usd += cost
        charge = Charge(model=model, usage=dict(usage), cost_usd=cost)
        self.on_charge(charge)
        return charge

    @property
    def reached(self) -> bool:
        return self.cap_usd is not None and (self.spent_usd >= self.cap_usd or bool(self.unpriced))

    def summary(self) -> str:
        """What was spent, as a sentence part: "$0.0123 over 3 model responses (prices of …)"."""
        text = f"${self.spent_usd:.4f} over {self.responses} model response{'s' if self.responses != 1 else ''}"
        if self.unpriced:
            text += f", {len(self.unpriced)} of model {self.unpriced[0]!r} not in the price table"
        return text + f" (prices taken {self.prices.taken})"

    def refusal(self) -> str | None:
        if not self.reached:
            return None
        return (f"metaharness refused this model request: the run's budget --max-cost-usd {self.cap_usd:g} "
                f"is spent ({self.summary()})")
