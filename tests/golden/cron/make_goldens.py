"""Goldens for vibedesk's cron schedules (docs §21.1): next fire times from
croniter 7.0 for seeded expressions across time zones and the daylight-saving
changes of 2024-2026, written to cron.json beside this script.

    python3 -m venv /tmp/cronvenv && /tmp/cronvenv/bin/pip install -r requirements.txt
    /tmp/cronvenv/bin/python make_goldens.py

Time zones come from the pinned tzdata package only (not the system's), so the
rules are IANA 2025b, the release chrono-tz embeds.

vibedesk differs from croniter on purpose in three places, listed in docs
§21.1 and encoded below: a schedule with a fixed hour (its hour field names
some hours, not all) fires once when the clock goes back, at the first pass of
the repeated wall time, where croniter fires in both passes (`vibedesk_rule`);
an equal range such as `5-5` is its one value, where croniter takes the whole
field; and a wrapped range with a step keeps its phase across the wrap
(`vibedesk_item`: the expected fires are croniter's for the expression written
the way vibedesk reads it, kept as `read_as`). Each case keeps croniter's own
fires under `croniter` when they differ from the expected ones.
"""

import datetime as dt
import json
import random
import zoneinfo
from pathlib import Path

import croniter as croniter_module
from croniter import croniter

zoneinfo.reset_tzpath(to=[])  # tzdata's rules, not the system's

SEED = 39
EXPRESSIONS = 1200
FIRES = 5
UTC = dt.timezone.utc
ZONES = [
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Australia/Sydney",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "UTC",
    "America/Sao_Paulo",
    "America/Santiago",  # changes at midnight: whole dates start at 01:00
    "Australia/Lord_Howe",  # a half-hour change
    "Pacific/Chatham",  # changes at 02:45 / 03:45
]
MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


def transitions(zone):
    """UTC instants in 2024-2026 where the zone's offset changes (to the minute)."""
    tz = zoneinfo.ZoneInfo(zone)
    out = []
    t = dt.datetime(2024, 1, 1, tzinfo=UTC)
    end = dt.datetime(2027, 1, 1, tzinfo=UTC)
    step = dt.timedelta(minutes=15)
    prev = t.astimezone(tz).utcoffset()
    while t < end:
        n = t + step
        off = n.astimezone(tz).utcoffset()
        if off != prev:
            lo, hi = t, n
            while hi - lo > dt.timedelta(minutes=1):
                mid = lo + (hi - lo) / 2
                mid = mid.replace(second=0, microsecond=0)
                if mid.astimezone(tz).utcoffset() == prev:
                    lo = mid
                else:
                    hi = mid
            out.append(hi)
            prev = off
        t = n
    return out


def value(rng, lo, hi, names=None, first=0):
    return value_of(rng, rng.randint(lo, hi), names, first)


def item(rng, lo, hi, names=None, first=0, hot=None):
    """One list item of a field: a value, a range, a step, a range with a step."""
    r = rng.random()
    if hot and r < 0.35:
        return str(rng.choice(hot))
    if r < 0.55:
        return value(rng, lo, hi, names, first)
    if r < 0.75:
        a = rng.randint(lo, hi - 1)
        b = rng.randint(a + 1, hi)
        return f"{value_of(rng, a, names, first)}-{value_of(rng, b, names, first)}"
    if r < 0.85:
        a = rng.randint(lo, hi - 1)
        b = rng.randint(a + 1, hi)
        return f"{a}-{b}/{rng.randint(1, max(1, (hi - lo) // 2))}"
    if r < 0.92:
        # A wrapped range (FRI-MON, 22-2), now and then with a step.
        a = rng.randint(lo + 1, hi)
        b = rng.randint(lo, a - 1)
        step = f"/{rng.randint(2, 4)}" if rng.random() < 0.3 else ""
        return f"{value_of(rng, a, names, first)}-{value_of(rng, b, names, first)}{step}"
    if r < 0.95:
        # An equal range (5-5, SUN-SUN, 7-0).
        a = rng.randint(lo, hi)
        return f"{value_of(rng, a, names, first)}-{value_of(rng, a, names, first)}"
    return f"*/{rng.randint(2, max(2, (hi - lo) // 2))}"


def value_of(rng, v, names, first):
    if names and 0 <= v - first < len(names) and rng.random() < 0.3:
        return names[v - first]
    return str(v)


def field(rng, lo, hi, p_star, names=None, first=0, hot=None):
    if rng.random() < p_star:
        return "*"
    n = 1 if rng.random() < 0.7 else rng.randint(2, 3)
    return ",".join(item(rng, lo, hi, names, first, hot) for _ in range(n))


def expression(rng):
    minute = field(rng, 0, 59, 0.15, hot=[0, 15, 30, 45, 59])
    # Hours around the changes (00:00-03:59 local) are the interesting ones.
    hour = field(rng, 0, 23, 0.3, hot=[0, 1, 2, 3, 23])
    dom = field(rng, 1, 31, 0.6, hot=[1, 15, 28, 29, 30, 31])
    month = field(rng, 1, 12, 0.6, names=MONTHS, first=1, hot=[3, 4, 10, 11])
    dow = field(rng, 0, 7, 0.6, names=DAYS, first=0, hot=[0, 7, 1, 5])
    return f"{minute} {hour} {dom} {month} {dow}"


BOUNDS = [(0, 59, None, 0), (0, 23, None, 0), (1, 31, None, 0), (1, 12, MONTHS, 1), (0, 7, DAYS, 0)]


def number(text, names, first):
    if names and text.upper() in names:
        return names.index(text.upper()) + first
    return int(text)


def vibedesk_item(text, index):
    """vibedesk's reading of one item as croniter reads it, where they differ
    (docs §21.1): an equal range (5-5, SUN-SUN, 7-0: croniter takes the whole
    field) is its one value; a wrapped range with a step keeps the step's phase
    across the wrap (croniter's restart after the wrap is one short)."""
    lo, hi, names, first = BOUNDS[index]
    base, _, step = text.partition("/")
    if "-" not in base or base.startswith("*"):
        return text
    a, b = (number(x, names, first) for x in base.split("-"))
    dow = index == 4
    if dow:
        if (a, b) == (0, 7):
            return text  # every day, for both
        a, b = a % 7, b % 7
        hi = 6
    if a == b:
        return str(a)
    if a > b and step:
        width = hi - lo + 1
        span = (hi - a + 1) + (b - lo)
        values = sorted({(a - lo + k) % width + lo for k in range(0, span + 1, int(step))})
        return ",".join(str(v) for v in values)
    return text


def vibedesk_expr(expr):
    fields = expr.split()
    return " ".join(
        ",".join(vibedesk_item(it, i) for it in f.split(",")) for i, f in enumerate(fields)
    )


def is_second_pass(fire, tz):
    local = fire.astimezone(tz)
    ambiguous = local.replace(fold=0).utcoffset() != local.replace(fold=1).utcoffset()
    return ambiguous and local.fold == 1


def fires_of(expr, start, tz, count):
    it = croniter(expr, start)
    return [it.get_next(dt.datetime) for _ in range(count)]


def vibedesk_rule(expr, fires, tz):
    """croniter's fires less the second passes of a fixed-hour schedule."""
    fixed_hour = croniter(expr).expanded[1] != ["*"]
    if not fixed_hour:
        return fires
    return [f for f in fires if not is_second_pass(f, tz)]


def expected_fires(expr, start, tz):
    """The first FIRES of croniter's fires that `vibedesk_rule` keeps."""
    it = croniter(expr, start)
    kept = []
    while len(kept) < FIRES:
        kept += vibedesk_rule(expr, [it.get_next(dt.datetime)], tz)
    return kept


def iso(t):
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def main():
    rng = random.Random(SEED)
    changes = {zone: transitions(zone) for zone in ZONES}
    cases = []
    seen = set()
    skipped = 0
    while len(seen) < EXPRESSIONS:
        expr = expression(rng)
        if expr in seen:
            continue
        try:
            for text in (expr, vibedesk_expr(expr)):
                fires_of(text, dt.datetime(2024, 1, 1, tzinfo=UTC), "UTC", 1)
        except Exception:  # croniter refuses it, or it never fires
            skipped += 1
            continue
        seen.add(expr)
        for _ in range(2):
            zone = rng.choice(ZONES)
            tz = zoneinfo.ZoneInfo(zone)
            if changes[zone] and rng.random() < 0.7:
                around = rng.choice(changes[zone])
                start = around + dt.timedelta(seconds=rng.randint(-4 * 3600, 4 * 3600))
            else:
                base = dt.datetime(2024, 1, 1, tzinfo=UTC)
                start = base + dt.timedelta(seconds=rng.randint(0, 3 * 365 * 86400))
            if rng.random() < 0.5:
                start = start.replace(second=0)
            start = start.replace(microsecond=0).astimezone(tz)
            raw = fires_of(expr, start, tz, FIRES)
            ours = vibedesk_expr(expr)
            expected = expected_fires(ours, start, tz)
            case = {"expr": expr, "tz": zone, "start": iso(start), "fires": [iso(f) for f in expected]}
            if ours != expr:
                case["read_as"] = ours
            if [iso(f) for f in raw] != case["fires"]:
                case["croniter"] = [iso(f) for f in raw]
            cases.append(case)
    out = {
        "generator": "make_goldens.py",
        "seed": SEED,
        "croniter": croniter_module.__version__ if hasattr(croniter_module, "__version__") else "7.0.0",
        "tzdata": "2025b",
        "skipped_expressions": skipped,
        "cases": cases,
    }
    path = Path(__file__).with_name("cron.json")
    # One case a line, so a regenerated file diffs readably.
    head = json.dumps({k: v for k, v in out.items() if k != "cases"}, indent=1)[:-2]
    body = ",\n".join(json.dumps(c, separators=(",", ":")) for c in cases)
    path.write_text(head + ',\n "cases": [\n' + body + "\n]}\n")
    differing = sum(1 for c in cases if "croniter" in c)
    print(f"{len(cases)} cases, {len(seen)} expressions, {differing} differ from croniter, {skipped} skipped")


if __name__ == "__main__":
    main()
