#!/usr/bin/env python3
"""Deterministic Wikimedia EventStreams `recentchange`-shaped events, one per line as
`<key>\\t<json>` for `kcat -P -K '\\t'`. Usage: gen-recentchange.py [count] [seed] [first-id]."""
import json
import random
import sys
import uuid
from datetime import datetime, timedelta, timezone

count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 20240601)
wikis = [("enwiki", "en.wikipedia.org"), ("dewiki", "de.wikipedia.org"), ("frwiki", "fr.wikipedia.org"),
         ("commonswiki", "commons.wikimedia.org"), ("wikidatawiki", "www.wikidata.org"),
         ("jawiki", "ja.wikipedia.org")]
words = ["River", "Station", "Battle", "Album", "Festival", "Bridge", "Mountain", "Library", "Treaty",
         "Railway", "Cathedral", "Island", "Museum", "Election", "Harbour", "Observatory"]
places = ["Lisbon", "Kyoto", "Tromsø", "Valparaíso", "Accra", "Ghent", "Hobart", "Ulaanbaatar", "Cork", "Oaxaca"]
users = [f"Editor{n}" for n in range(1, 60)] + ["InternetArchiveBot", "ClueBot NG", "Citation bot",
                                                  "192.0.2.17", "2001:db8::5"]
types = ["edit"] * 70 + ["new"] * 10 + ["log"] * 10 + ["categorize"] * 10
namespaces = [0] * 70 + [1, 2, 3, 4, 6, 10, 14, 118] * 4
t = datetime(2024, 6, 1, 12, 0, 0, tzinfo=timezone.utc)
rc_id = int(sys.argv[3]) if len(sys.argv) > 3 else 1_750_000_000
out = sys.stdout
for i in range(count):
    t += timedelta(milliseconds=rng.randint(5, 400))
    rc_id += rng.randint(1, 3)
    wiki, domain = rng.choice(wikis)
    kind = rng.choice(types)
    ns = rng.choice(namespaces) if kind != "categorize" else 14
    title = f"{rng.choice(words)} of {rng.choice(places)}"
    if ns == 14:
        title = "Category:" + title
    user = rng.choice(users)
    old = None if kind == "new" else rng.randint(200, 90000)
    new = (old or 0) + rng.randint(-800, 2500) if kind in ("edit", "new") else old
    dt = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
    ev = {
        "$schema": "/mediawiki/recentchange/1.0.0",
        "meta": {"uri": f"https://{domain}/wiki/{title.replace(' ', '_')}",
                 "request_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                 "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                 "domain": domain, "stream": "mediawiki.recentchange", "dt": dt},
        "id": rc_id,
        "type": kind,
        "namespace": ns,
        "title": title,
        "comment": rng.choice(["", "copyedit", "fix typo", "/* History */ expand", "rv vandalism",
                               "Added category", "Bot: archiving 3 threads"]),
        "timestamp": int(t.timestamp()),
        "user": user,
        "bot": user.endswith("bot") or user.endswith("Bot") or user == "ClueBot NG",
        "minor": rng.random() < 0.3 if kind == "edit" else False,
        "length": {"old": old, "new": new},
        "server_name": domain,
        "wiki": wiki,
    }
    if kind == "log":
        ev["log_type"] = rng.choice(["move", "delete", "protect", "upload", "newusers"])
        ev.pop("length")
    key = f"{wiki}:{title}"
    out.write(key + "\t" + json.dumps(ev, ensure_ascii=False, separators=(",", ":")) + "\n")
