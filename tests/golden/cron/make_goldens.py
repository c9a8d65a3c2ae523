"""Goldens for vibedesk's cron schedules (docs §21.1): next fire times from
croniter 7.0 for seeded expressions across time zones and the daylight-saving
changes of 2024-2026, written to cron.json beside this script.

    python3 -m venv /tmp/cronvenv && /tmp/cronvenv/bin/pip install -r requirements.txt
    /tmp/cronvenv/bin/python make_goldens.py

Time zones come from the pinned tzdata package only (not the system's), so the
rules are IANA 2025b, the release chrono-tz embeds.

vibedesk differs from croniter on purpose in one place, encoded below in
`vibedesk_rule` and listed in docs §21.1: a schedule with a fixed hour (its
hour field names some hours, not all) fires once when the clock goes back, at
the first pass of the repeated wall time; croniter fires it in both passes.
Each case keeps croniter's own fires beside the expected ones when they differ.
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
    v = rng.randint(lo, hi)
    if names and rng.random() < 0.3 and lo <= v - first + first <= hi and 0 <= v - first < len(names):
        text = names[v - first]
        return rng.choice([text, text.lower(), text.title()])
    return str(v)


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
        # A wrapped range (FRI-MON, 22-2), no step: croniter's step across the
        # wrap is off by one (docs §21.1).
        a = rng.randint(lo + 1, hi)
        b = rng.randint(lo, a - 1)
        return f"{value_of(rng, a, names, first)}-{value_of(rng, b, names, first)}"
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
            croniter(expr)
            fires_of(expr, dt.datetime(2024, 1, 1, tzinfo=UTC), "UTC", 1)
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
            raw = fires_of(expr, start, tz, FIRES + 130)
            expected = vibedesk_rule(expr, raw, tz)[:FIRES]
            case = {"expr": expr, "tz": zone, "start": iso(start), "fires": [iso(f) for f in expected]}
            if [iso(f) for f in raw[:FIRES]] != case["fires"]:
                case["croniter"] = [iso(f) for f in raw[:FIRES]]
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
    path.write_text(json.dumps(out, indent=0, separators=(",", ":")) + "\n")
    differing = sum(1 for c in cases if "croniter" in c)
    print(f"{len(cases)} cases, {len(seen)} expressions, {differing} differ from croniter, {skipped} skipped")


if __name__ == "__main__":
    main()
