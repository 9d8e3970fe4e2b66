"""Generate ``trikafka/config/kafka_versions_data.py``: what each Kafka release's broker served.

    python tools/kafka_version_profiles.py [KAFKA_GIT_DIR] [FRANZ_GO_GIT_DIR] > trikafka/config/kafka_versions_data.py

Sources, read with ``git show TAG:PATH`` from two local mirrors (bare git directories):

* **2.8 – 3.9: apache/kafka at each release tag** (default ``/work/.mirror/apache+kafka/repo``;
  the newest tag of each minor release in that mirror, listed in ``TAGS``). For every
  ``clients/src/main/resources/common/message/*Request.json``: ``apiKey``, ``validVersions``,
  ``listeners`` and ``latestVersionUnstable`` (an unstable newest version is not advertised, as
  Kafka's ``ApiVersionsResponse`` leaves it out unless ``unstable.api.versions.enable``).
  ZooKeeper-era releases (2.8 – 3.2, before KRaft was production-ready) take the ``zkBroker``
  listener's APIs minus the cluster actions (``ApiKeys.java``'s ``clusterAction`` flag:
  LeaderAndIsr, StopReplica, ... — the client-facing ones); KRaft releases (3.3 on) take the
  ``broker`` listener's. GetTelemetrySubscriptions and PushTelemetry (KIP-714, 3.7+) are left
  out: a Kafka broker advertises them only when a client-telemetry reporter is configured.
  Features (KIP-584): none before 3.3 (no feature was defined); from 3.3 ``metadata.version``
  from ``MetadataVersion.java`` (supported ``MINIMUM_KRAFT_VERSION`` .. ``LATEST_PRODUCTION``,
  or the newest level before ``LATEST_PRODUCTION`` existed), plus each production feature of
  ``Features.java`` whose newest level usable at that metadata version is above 0 (Kafka's
  ``BrokerFeatures.defaultSupportedFeatures``); finalized: what ``kafka-storage format`` sets by
  default (metadata.version at ``LATEST_PRODUCTION``; kraft.version is left out: it depends on
  how the quorum was formatted).
* **4.0 – 4.2: the 3.9 table plus the per-release changes of franz-go's ``pkg/kversion``**
  (``requests.go``: ``b40``..``b42``, each ``setmin``/``incmax``/``addkey``/``addkeyver``/``delete``
  with the Kafka commit and KIP it cites; default ``/work/.mirror/twmb+franz-go/repo``), after
  checking that franz-go's own tables agree with the ones derived above: its ``b39`` with 3.9,
  its ZooKeeper tables ``z28``..``z32`` with 2.8 – 3.2 (client-facing APIs); the share-group APIs'
  minimums corrected to v1 (``FRANZ_MIN_FIXES``). The apache/kafka mirror
  holds no 4.x tag.
* **4.3 and 4.4: transcribed by hand from Apache Kafka's own generated protocol docs** in
  apache/kafka-site (``43/generated/protocol_messages.html`` at c58a608fc4aa, and
  ``44/generated/protocol_messages.html`` at 70950cc6657b with ``44/generated/protocol_api_keys.html``
  at 6d5deab16b23; ``DOCS`` below): for each API, the lowest and highest "Request (Version: N)" the
  page documents. The page documents ``ApiKeys.clientApis()``, the APIs in the broker listener's
  scope (4.4's key list names no controller-only API: no Vote, BrokerRegistration, FetchSnapshot,
  AllocateProducerIds, UpdateRaftVoter), so no listener filter is needed. Applied as for the other
  releases: a version the page marks "unstable" is not advertised (``DOCS_UNSTABLE``), telemetry is
  left out; and Produce keeps the minimum 0 the 4.0 – 4.2 tables have (the page documents v3 – 13;
  Kafka's ApiVersions still answers 0 there, KAFKA-18659, as franz-go's 4.x tables record).
* **4.x features** (4.0 – 4.4) are typed below (``METADATA_4X``, ``FEATURES_4X``), each level with
  the apache/kafka pull request, kafka-site page or MetadataVersion.java snapshot it comes from:
  metadata.version from ``MINIMUM_VERSION`` (3.3-IV3, level 7) to the release's
  ``LATEST_PRODUCTION``, finalized there; each other feature at its default for that metadata
  version, as ``kafka-storage format`` sets it. A level no source gives would be written as -1
  (a gap, listed at start) rather than guessed; none is left.
"""

from __future__ import annotations

import re
import subprocess
import sys

KAFKA = sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror/apache+kafka/repo"
FRANZ = sys.argv[2] if len(sys.argv) > 2 else "/work/.mirror/twmb+franz-go/repo"
MESSAGES = "clients/src/main/resources/common/message"
COMMON = "server-common/src/main/java/org/apache/kafka/server/common"

#: release → the newest tag of it in the apache/kafka mirror (3.8.1 and 3.9.0 only as RCs).
TAGS = {
    "2.8": "2.8.2", "3.0": "3.0.2", "3.1": "3.1.2", "3.2": "3.2.3", "3.3": "3.3.2", "3.4": "3.4.1",
    "3.5": "3.5.2", "3.6": "3.6.2", "3.7": "3.7.1", "3.8": "3.8.1-rc1", "3.9": "3.9.0-rc3",
}
ZK_ERA = ("2.8", "3.0", "3.1", "3.2")
TELEMETRY = (71, 72)

#: metadata.version of each 4.x release: LATEST_PRODUCTION's level, which a newly formatted cluster finalizes;
#: supported from MINIMUM_VERSION = IBP_3_3_IV3 (level 7: apache/kafka#18845 "KAFKA-18601: Assume a baseline of
#: 3.3 for server protocol versions", before 4.0.0; "the software and metadata versions must be at least 3.3.x",
#: every 4.x upgrade note). Sources, apache/kafka unless named:
#: 4.0 IBP_4_0_IV3 = 25: PR #18902 "Mark IBP_4_0_IV3 as production ready ... for the Apache Kafka 4.0
#:     release" (MetadataVersionTest: "4.0-IV3 is the latest production version in the 4.0 line").
#: 4.1 IBP_4_1_IV1 = 27: PR #20948 (2025-11-24, after 4.1.0): LATEST_PRODUCTION "is still set to IBP_4_1_IV1
#:     both in trunk and 4.2"; aiven/inkless@0c900bdc (a fork of apache/kafka in the 4.1 line) MetadataVersion.java:
#:     LATEST_PRODUCTION = IBP_4_1_IV1, IBP_4_2_IV0/IV1 unstable placeholders.
#: 4.2 IBP_4_2_IV1 = 29: PRs #20972 / #20993 "Bump LATEST_PRODUCTION to 4.2-IV1 ... for Apache Kafka 4.2.0 to
#:     enable share groups and streams groups by default"; kafka-site 43/ upgrade notes name IBP_4_2_IV1(29).
#: 4.3 IBP_4_3_IV0 = 30: kafka-site content/en/43/getting-started/upgrade.md @ 11a9a8f8 ("IBP_4_3_IV0(30, "4.3",
#:     "IV0", true)", finalize with --release-version 4.3); PR #23235: "metadata.version in RC0 [of 4.4] shipped
#:     as 4.3-IV0" and kafkatest's LATEST_STABLE_METADATA_VERSION was "4.3-IV0" before it; m1a2st/kafka@59f99e2f
#:     MetadataVersion.java: LATEST_PRODUCTION = IBP_4_3_IV0 with IBP_4_4_IV0/IV1 unstable; kafbat/kafka-ui#1877,
#:     checked against a Kafka 4.3.0 broker: "metadata.version=30 (4.3)", supported 3.3-IV3 .. 4.3-IV0.
#: 4.4 IBP_4_4_IV2 = 33: PR #23235 "Bump LATEST_PRODUCTION to 4.4-IV2 for 4.4.0" (merged for 4.4.0 RC1).
METADATA_4X = {"4.0": 25, "4.1": 27, "4.2": 29, "4.3": 30, "4.4": 33}
METADATA_MINIMUM_4X = 7

#: 4.x features (name → (supported min, max), finalized default or None). A feature's default is its newest
#: level whose bootstrap metadata version is at or below the release's LATEST_PRODUCTION (Feature.defaultVersion);
#: None: not finalized by a default format (kraft.version depends on how the quorum was formatted).
#: group.version 1 (KIP-848, GV_1 at IBP_4_0_IV0) and transaction.version 2 (KIP-890 part 2, TV_2 at
#: IBP_4_0_IV2) from 4.0: Kafka 4.0's upgrade notes (kafka.apache.org/40/getting-started/upgrade).
#: eligible.leader.replicas.version: supported from 4.0, on by default for new clusters from 4.1 (ELRV_1 at
#: IBP_4_1_IV0; kafka.apache.org/41/operations/eligible-leader-replicas). kraft.version 0-1 since 3.9 (KIP-853).
#: A feature whose newest production level is 0 is not advertised at all (BrokerFeatures.defaultSupportedFeatures:
#: "if (maxVersion > 0)"). share.version 1 from 4.1, a preview off by default: PR #19831 "sets SV_1 as the
#: latest-production share version ... for AK 4.1 it will be a preview feature, not enabled by default ...
#: analogous to how ELR worked for AK 4.0". streams.version is not advertised by 4.1: its early access needed
#: unstable.feature.versions.enable=true (PR #20241, tried on 4.1.0 RC1; StreamsVersion.java @ 0b71a60d:
#: "Mark 'streams' group as unstable in AK 4.1 release", LATEST_PRODUCTION = SV_0). 4.2 turns both on by
#: default (share SV_1 at IBP_4_2_IV0, streams SV_1 at IBP_4_2_IV1: PRs #20972 / #20993 above).
#: 4.3: the same levels as 4.2 (no feature level moved; a 4.3.1 cluster's
#: `kafka-features.sh describe` and `version-mapping --release-version 4.3` print these ranges and
#: metadata.version=30, transaction.version=2, group.version=1, eligible.leader.replicas.version=1,
#: share.version=1, streams.version=1). 4.4: share.version 2 (KIP-1191 share-group dead-letter queues, SV_2 at
#: IBP_4_4_IV0): PR #21994 "Add share.version=2" (slated for 4.4), PR #22803 "Bump latest production
#: ShareVersion to 2 (SV_2)", PR #23235 "the default share.version at 4.4-IV2 moves from 1 to 2" (the only
#: default that PR saw move).
_FEATURES_40 = {"kraft.version": ((0, 1), None), "group.version": ((0, 1), 1), "transaction.version": ((0, 2), 2)}
FEATURES_4X = {
    "4.0": {**_FEATURES_40, "eligible.leader.replicas.version": ((0, 1), None)},
    "4.1": {**_FEATURES_40, "eligible.leader.replicas.version": ((0, 1), 1), "share.version": ((0, 1), None)},
    "4.2": {**_FEATURES_40, "eligible.leader.replicas.version": ((0, 1), 1),
            "share.version": ((0, 1), 1), "streams.version": ((0, 1), 1)},
    "4.3": {**_FEATURES_40, "eligible.leader.replicas.version": ((0, 1), 1),
            "share.version": ((0, 1), 1), "streams.version": ((0, 1), 1)},
    "4.4": {**_FEATURES_40, "eligible.leader.replicas.version": ((0, 1), 1),
            "share.version": ((0, 2), 2), "streams.version": ((0, 1), 1)},
}


def features_4x(release: str) -> dict[str, tuple[tuple[int, int], int | None]]:
    """A 4.x release's features: metadata.version first, then the others (``METADATA_4X``, ``FEATURES_4X``)."""
    level = METADATA_4X[release]
    return {"metadata.version": ((METADATA_MINIMUM_4X, level), level), **FEATURES_4X[release]}


#: 4.3 / 4.4 request versions as kafka-site's generated protocol pages document them (api key → (lowest,
#: highest)), typed from the pages above; 4.4's page read whole, 4.3's read where it can differ (see
#: docs/version-profiles.md for which 4.3 sections were read and which follow from 4.2 and 4.4 agreeing).
_DOCS_43 = {
    0: (3, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 11: (0, 9), 12: (0, 4),
    13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2),
    22: (0, 6), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 5), 29: (1, 3), 30: (1, 3),
    31: (1, 3), 32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 5), 36: (0, 2), 37: (0, 3), 38: (1, 3), 39: (1, 2),
    40: (1, 2), 41: (1, 3), 42: (0, 2), 43: (0, 2), 44: (0, 1), 45: (0, 1), 46: (0, 0), 47: (0, 0), 48: (0, 1),
    49: (0, 1), 50: (0, 0), 51: (0, 0), 55: (0, 2), 57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0),
    66: (0, 2), 68: (0, 1), 69: (0, 1), 71: (0, 0), 72: (0, 0), 74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1),
    78: (1, 2), 79: (1, 2), 80: (0, 1), 81: (0, 0), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1),
    88: (0, 0), 89: (0, 0), 90: (0, 1), 91: (0, 0), 92: (0, 0),
}
#: 4.4 over 4.3: ApiVersions v5 (cluster_id, node_id), TxnOffsetCommit v6 (topic ids), DeleteGroups v3
#: (error_message), StreamsGroupHeartbeat/Describe v1, StreamsGroupTopologyDescriptionUpdate (93) and
#: UnregisterController (94) new.
DOCS = {
    "4.3": {"source": "apache/kafka-site 43/generated/protocol_messages.html @ c58a608fc4aa (Kafka's protocol docs)",
            "apis": _DOCS_43},
    "4.4": {"source": "apache/kafka-site 44/generated/protocol_messages.html @ 70950cc6657b (Kafka's protocol docs)",
            "apis": {**_DOCS_43, 18: (0, 5), 28: (0, 6), 42: (0, 3), 88: (0, 1), 89: (0, 1), 93: (0, 0), 94: (0, 0)}},
}
#: Versions the pages mark "This version of the request is unstable." (release → {api key: version}).
DOCS_UNSTABLE = {"4.3": {22: 6}, "4.4": {22: 6}}


def docs_release(release: str) -> dict:
    """A 4.3 / 4.4 table from the transcribed page ranges and the rules in the module docstring."""
    apis = {}
    for key, (lo, hi) in DOCS[release]["apis"].items():
        if key in TELEMETRY:
            continue
        if DOCS_UNSTABLE[release].get(key) == hi:
            hi -= 1
        apis[key] = (0, hi) if key == 0 else (lo, hi)
    return {"apis": dict(sorted(apis.items())), "features": features_4x(release), "source": DOCS[release]["source"]}
#: franz-go's 4.1 / 4.2 tables start the share-group APIs (76-79) at v0; Kafka served them from v1 (4.0's
#: early-access v0 was dropped in 4.1): kafka-site 42/generated/protocol_messages.html @ b4e4927ca8ae
#: documents ShareGroupHeartbeat, ShareGroupDescribe and ShareFetch from v1, and kafka-python 3.0.12's own
#: 4.1 / 4.2 tables agree (tests/compat/test_version_profiles.py compares them).
FRANZ_MIN_FIXES = {"4.1": {76: 1, 77: 1, 78: 1, 79: 1}, "4.2": {76: 1, 77: 1, 78: 1, 79: 1}}


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True, text=True).stdout


def _json(text: str) -> dict:
    """The header fields of a message definition (the files are JSON with // comments)."""
    found = {
        "apiKey": int(re.search(r'"apiKey":\s*(\d+)', text).group(1)),
        "name": re.search(r'"name":\s*"(\w+)"', text).group(1),
        "validVersions": re.search(r'"validVersions":\s*"([\d-]+)"', text).group(1),
        "latestVersionUnstable": bool(re.search(r'"latestVersionUnstable":\s*true', text)),
    }
    listeners = re.search(r'"listeners":\s*\[([^\]]*)\]', text)
    found["listeners"] = re.findall(r'"(\w+)"', listeners.group(1)) if listeners else []
    return found


def _range(valid: str) -> tuple[int, int]:
    lo, _, hi = valid.partition("-")
    return int(lo), int(hi or lo)


def cluster_actions(tag: str) -> set[str]:
    """ApiMessageType names with ``clusterAction`` true in ``ApiKeys.java`` at ``tag``."""
    text = git(KAFKA, "show", f"{tag}:clients/src/main/java/org/apache/kafka/common/protocol/ApiKeys.java")
    return set(re.findall(r"ApiMessageType\.(\w+),\s*true", text))


def apis_at(release: str) -> dict[int, tuple[int, int]]:
    tag = TAGS[release]
    listener = "zkBroker" if release in ZK_ERA else "broker"
    actions = cluster_actions(tag) if release in ZK_ERA else set()
    out = {}
    for path in git(KAFKA, "ls-tree", "--name-only", f"{tag}:{MESSAGES}").split():
        if not path.endswith("Request.json"):
            continue
        spec = _json(git(KAFKA, "show", f"{tag}:{MESSAGES}/{path}"))
        if listener not in spec.get("listeners", ()):
            continue
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", spec["name"][: -len("Request")]).upper()
        if snake in actions or spec["apiKey"] in TELEMETRY:
            continue
        lo, hi = _range(spec["validVersions"])
        if spec.get("latestVersionUnstable"):
            hi -= 1
        if hi >= lo:
            out[spec["apiKey"]] = (lo, hi)
    return dict(sorted(out.items()))


def metadata_levels(release: str) -> tuple[int, int] | None:
    if release in ZK_ERA:
        return None
    text = git(KAFKA, "show", f"{TAGS[release]}:{COMMON}/MetadataVersion.java")
    levels = {name: int(level) for name, level in re.findall(r"^\s+(IBP_\w+)\((-?\d+),", text, flags=re.M)}
    minimum = levels[re.search(r"MINIMUM_KRAFT_VERSION = (\w+);", text).group(1)]
    latest = re.search(r"LATEST_PRODUCTION = (\w+);", text)
    newest = levels[latest.group(1)] if latest else max(levels.values())
    return minimum, newest


def features_at(release: str) -> dict[str, tuple[tuple[int, int], int | None]]:
    levels = metadata_levels(release)
    if levels is None:
        return {}
    out: dict[str, tuple[tuple[int, int], int | None]] = {"metadata.version": (levels, levels[1])}
    tag = TAGS[release]
    try:
        feats = git(KAFKA, "show", f"{tag}:{COMMON}/Features.java")
    except subprocess.CalledProcessError:
        return out
    mv = git(KAFKA, "show", f"{tag}:{COMMON}/MetadataVersion.java")
    mv_levels = {name: int(level) for name, level in re.findall(r"^\s+(IBP_\w+)\((-?\d+),", mv, flags=re.M)}
    for name, cls in re.findall(r'^\s+[A-Z_]+\("([a-z.]+)", (\w+)\.values\(\)\)', feats, flags=re.M):
        if name == "test.feature.version":
            continue
        source = git(KAFKA, "show", f"{tag}:{COMMON}/{cls}.java")
        usable = [int(v) for v, ibp in re.findall(r"^\s+\w+\((\d+), MetadataVersion\.(\w+)", source, flags=re.M)
                  if ibp == "MINIMUM_KRAFT_VERSION" or mv_levels[ibp] <= levels[1]]
        if max(usable) > 0:
            out[name] = ((0, max(usable)), None if name == "kraft.version" else max(usable))
    return out


def franz_zk_releases() -> dict[str, dict[int, tuple[int, int]]]:
    """franz-go's ZooKeeper-broker tables z081..z39, replayed from z080's keys."""
    text = git(FRANZ, "show", "HEAD:pkg/kversion/requests.go")
    bodies = dict(re.findall(r"^func (z\d+)\(\) \*release \{\n(.*?)^\}", text, flags=re.M | re.S))
    table = {int(k): (0, 0) for k in re.findall(r"(\d+): \{key: \d+\}", bodies["z080"])}
    tables = {}
    for name in ZK_CHAIN[1:]:
        table = tables[name] = _replay(table, bodies[name])
    return tables


ZK_CHAIN = ("z080", "z081", "z082", "z090", "z0100", "z0101", "z0102", "z0110", "z10", "z11", "z20", "z21",
            "z22", "z23", "z24", "z25", "z26", "z27", "z28", "z30", "z31", "z32")
#: Left out of the ZooKeeper-era comparison: cluster actions (franz-go lists them) and
#: UpdateFeatures (franz-go leaves it out of its ZooKeeper tables).
_NOT_COMPARED = {4, 5, 6, 7, 27, 56, 57, 58, 67}


def check_against_franz(releases: dict[str, dict], franz: dict[str, dict[int, tuple[int, int]]]) -> None:
    """Stop unless franz-go's independent tables agree with the ones derived from Kafka's tags."""
    zk = franz_zk_releases()
    pairs = [(r, zk[f"z{r.replace('.', '')}"], _NOT_COMPARED | set(TELEMETRY)) for r in ZK_ERA]
    pairs.append(("3.9", franz["b39"], set(TELEMETRY)))
    for release, theirs, skip in pairs:
        ours = {k: v for k, v in releases[release]["apis"].items() if k not in skip}
        theirs = {k: v for k, v in theirs.items() if k not in skip}
        if ours != theirs:
            keys = sorted(set(ours) | set(theirs))
            diff = {k: (ours.get(k), theirs.get(k)) for k in keys if ours.get(k) != theirs.get(k)}
            sys.exit(f"{release} from apache/kafka differs from franz-go's table (ours, theirs): {diff}")


def franz_releases() -> dict[str, dict[int, tuple[int, int]]]:
    """franz-go's broker tables b28..b42, replayed from its requests.go."""
    text = git(FRANZ, "show", "HEAD:pkg/kversion/requests.go")
    bodies = dict(re.findall(r"^func (b\d+)\(\) \*release \{\n(.*?)^\}", text, flags=re.M | re.S))
    table = {int(k): (0, int(v)) for k, v in re.findall(r"(\d+):\s*\{key: \d+, vmax: (\d+)\}", bodies["b28"])}
    tables = {"b28": dict(table)}
    for name in sorted((n for n in bodies if n != "b28"), key=lambda n: int(n[1:])):
        table = tables[name] = _replay(table, bodies[name])
    return tables


def _replay(table: dict[int, tuple[int, int]], body: str) -> dict[int, tuple[int, int]]:
    table = dict(table)
    for line in body.splitlines():
        code = line.split("//")[0].strip()
        if m := re.fullmatch(r"now\.setmin\((\d+), (\d+)\)", code):
            key, v = int(m[1]), int(m[2])
            table[key] = (v, table[key][1])
        elif m := re.fullmatch(r"now\.incmax\((\d+), (\d+)\)", code):
            key, v = int(m[1]), int(m[2])
            assert table[key][1] + 1 == v, (key, v)
            table[key] = (table[key][0], v)
        elif m := re.fullmatch(r"now\.addkey\((\d+)\)", code):
            table[int(m[1])] = (0, 0)
        elif m := re.fullmatch(r"now\.addkeyver\((\d+), (\d+)\)", code):
            table[int(m[1])] = (0, int(m[2]))
        elif m := re.fullmatch(r"delete\(now\.reqs, (\d+)\)", code):
            del table[int(m[1])]
    return table


def main() -> None:
    releases: dict[str, dict] = {}
    for release in TAGS:
        releases[release] = {"apis": apis_at(release), "features": features_at(release),
                             "source": f"apache/kafka {TAGS[release]} (message definitions)"}
    franz = franz_releases()
    check_against_franz(releases, franz)
    base = releases["3.9"]["apis"]
    previous = franz["b39"]
    for release, name in (("4.0", "b40"), ("4.1", "b41"), ("4.2", "b42")):
        table = dict(base)
        for key in set(previous) | set(franz[name]):
            if key in TELEMETRY:
                continue
            if franz[name].get(key) != previous.get(key):
                if key in franz[name]:
                    table[key] = franz[name][key]
                else:
                    table.pop(key, None)
        for key, low in FRANZ_MIN_FIXES.get(release, {}).items():
            table[key] = (low, table[key][1])
        base, previous = dict(sorted(table.items())), franz[name]
        releases[release] = {"apis": base, "features": features_4x(release),
                             "source": f"3.9 + franz-go pkg/kversion {name} (Kafka commits and KIPs it cites)"}
    for release in DOCS:
        releases[release] = docs_release(release)
    write(releases)


def write(releases: dict[str, dict]) -> None:
    out = sys.stdout
    out.write('"""Generated by ``tools/kafka_version_profiles.py`` — do not edit; read that script for the\n')
    out.write("sources. Per Kafka release: the broker's API versions (api key → (min, max)) and its features\n")
    out.write("(name → ((supported min, max), finalized level or None)); -1: not known from any source at hand.\n")
    out.write('"""\n\n__all__ = ["RELEASES"]\n\n')
    out.write("RELEASES: dict[str, dict] = {\n")
    for release, data in releases.items():
        out.write(f"    \"{release}\": {{\n        \"source\": \"{data['source']}\",\n        \"apis\": {{\n")
        items = [f"{k}: {v!r}" for k, v in data["apis"].items()]
        line = "           "
        for item in items:
            if len(line) + len(item) + 2 > 116:
                out.write(line.rstrip() + "\n")
                line = "           "
            line += f" {item},"
        out.write(line.rstrip() + "\n        },\n")
        out.write("        \"features\": {\n")
        for name, (supported, finalized) in data["features"].items():
            out.write(f"            {name!r}: ({supported!r}, {finalized!r}),\n".replace("'", '"'))
        out.write("        },\n    },\n")
    out.write("}\n")


if __name__ == "__main__":
    main()
