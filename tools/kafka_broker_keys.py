"""Print every broker key of a Kafka source tree, with the ConfigDef class that defines it.

    python tools/kafka_broker_keys.py /path/to/kafka-checkout > keys.txt

It reads the ``define()``/``defineInternal()`` calls of the ConfigDefs Kafka's
``AbstractKafkaConfig.CONFIG_DEF`` merges (the classes listed below, and
``LogConfig.SERVER_CONFIG_DEF``), resolving each key constant through the ``static final String``
declarations of the tree (string concatenation and ``ServerTopicConfigSynonyms.serverSynonym``
included). Its output is what ``trikafka/config/kafka_keys.py`` holds. Unresolvable keys are reported
on stderr and skipped.
"""

import glob
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kafka-src")
consts = {}
decl = re.compile(r"(?:public|private|protected)?\s*static\s+final\s+String\s+(\w+)\s*=\s*(.*?);", re.S)
files = {}
for p in root.rglob("*.java"):
    if "/test/" in str(p):
        continue
    t = p.read_text(errors="ignore")
    files[p.stem] = t
    for name, expr in decl.findall(t):
        consts.setdefault((p.stem, name), expr)
        consts.setdefault(name, expr)
# imported static defs also in interfaces
_syn_src = open(glob.glob(f"{root}/**/ServerTopicConfigSynonyms.java", recursive=True)[0]).read()


def synonym(topic_const):
    name = topic_const.split(".")[-1]
    m = re.search(
        r"(sameName|sameNameWithLogPrefix|sameNameWithLogCleanerPrefix|singleWithLogPrefix|singleWithLogCleanerPrefix|listWithLogPrefix|single)\(TopicConfig\."
        + name
        + r'\b\s*(?:,\s*(?:new ConfigSynonym\()?"([^"]+)")?',
        _syn_src,
    )
    kind, extra = m.group(1), m.group(2)
    base = resolve("TopicConfig." + name)
    return {
        "sameName": base,
        "sameNameWithLogPrefix": "log." + base,
        "sameNameWithLogCleanerPrefix": "log.cleaner." + base,
        "singleWithLogPrefix": "log." + (extra or ""),
        "singleWithLogCleanerPrefix": "log.cleaner." + (extra or ""),
        "listWithLogPrefix": "log." + (extra or ""),
        "single": extra,
    }[kind]


def resolve(expr, depth=0):
    if depth > 10:
        raise ValueError(expr)
    m = re.fullmatch(r"ServerTopicConfigSynonyms\.serverSynonym\((TopicConfig\.\w+)\)", expr.strip())
    if m:
        return synonym(m.group(1))
    parts = [x.strip() for x in re.split(r'\+(?=(?:[^"]*"[^"]*")*[^"]*$)', expr)]
    out = ""
    for part in parts:
        if part.startswith('"'):
            out += part.strip('"')
        else:
            if "." in part:
                cls, name = part.rsplit(".", 1)
                cls = cls.rsplit(".", 1)[-1]
                e = consts.get((cls, name)) or consts.get(name)
            else:
                e = consts.get(part)
            if e is None:
                raise KeyError(part)
            out += resolve(e, depth + 1)
    return out


def defines(text):
    return re.findall(r"\.define(?:Internal)?\(\s*([^,]+?)\s*,", text)


classes = [
    "ZkConfigs",
    "ServerConfigs",
    "KRaftConfigs",
    "SocketServerConfigs",
    "ReplicationConfigs",
    "GroupCoordinatorConfig",
    "CleanerConfig",
    "ShareGroupConfig",
    "ShareCoordinatorConfig",
    "TransactionLogConfig",
    "TransactionStateManagerConfig",
    "QuorumConfig",
    "MetricConfigs",
    "QuotaConfig",
    "BrokerSecurityConfigs",
    "DelegationTokenManagerConfigs",
    "PasswordEncoderConfigs",
    "RemoteLogManagerConfig",
]
keys = {}
internal = set()
for c in classes:
    t = files[c]
    for m in re.finditer(r"\.define(Internal)?\(\s*([^,]+?)\s*,", t):
        try:
            k = resolve(m.group(2))
        except (KeyError, ValueError, AttributeError):
            print("skip", c, m.group(2), file=sys.stderr)
            continue
        keys[k] = c
        if m.group(1):
            internal.add(k)
t = files["LogConfig"]
block = t[t.index("SERVER_CONFIG_DEF = new ConfigDef()") :]
block = block[: block.index(";")]
for m in re.finditer(r"\.define(Internal)?\(\s*([^,]+?)\s*,", block):
    k = resolve(m.group(2))
    keys[k] = "LogConfig.SERVER_CONFIG_DEF"
    if m.group(1):
        internal.add(k)
print(len(keys), "internal", len(internal), file=sys.stderr)
for k in sorted(keys):
    print(k, keys[k], "internal" if k in internal else "")
