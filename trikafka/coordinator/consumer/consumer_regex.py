"""Regular-expression subscriptions of KIP-848 consumer groups, resolved as Kafka 4 does.

Theory of operation
-------------------
A member subscribing with ``SubscribedTopicRegex`` does not get the matching topics in the
answer to that heartbeat. Kafka's ``GroupMetadataManager`` resolves a group's regular
expressions *asynchronously* (an executor task per group) and folds the result in later:

* **On a heartbeat** (:func:`on_heartbeat`, Kafka's ``maybeUpdateRegularExpressions``): a
  member that changed its regex drops the old one's resolution if it was its last subscriber.
  A regex no one else uses asks for a resolution; one already resolved for others bumps the
  group epoch at once. A resolution is then scheduled when the group has regexes, none is
  under way, the last one is older than ``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS`` (10 s), and
  one of these holds: a regex is unresolved, the topics changed since the last resolution
  (created or deleted: Kafka's ``lastMetadataImageWithNewTopics``), or the last resolution is
  older than ``group.consumer.regex.refresh.interval.ms``.
* **In the background** (:func:`resolve`, Kafka's ``refreshRegularExpressions`` and
  ``handleRegularExpressionsResult``): every regex the group still subscribes to is matched
  against the topics of that moment; a changed result bumps the group epoch, so members see
  the new topics at their next heartbeat — never in the answer that brought the regex.

Until then the member is assigned only its literal topic names (librdkafka's test 0045
expects exactly this of a Kafka 4 broker). The resolution is a timer due at once
(``ScheduleTimer`` with kind ``REGEX``): the machine's effects are carried out after the call,
so the heartbeat's answer is computed before it runs. Resolutions are soft state — a loaded
group resolves its regexes again (:func:`resolve_all`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from trikafka.coordinator.consumer.consumer_group import (
    INTERNAL_TOPICS,
    ConsumerGroup,
    ConsumerGroupMember,
    ResolvedRegex,
    topic_pattern,
)
from trikafka.coordinator.consumer.consumer_group_protocol import REGEX, ConsumerTimerKey
from trikafka.coordinator.group_protocol import Effect, ScheduleTimer

__all__ = ["REGEX_BATCH_REFRESH_MIN_INTERVAL_MS", "fold_in", "matching", "on_heartbeat", "resolve", "resolve_all"]

log = logging.getLogger("trikafka.coordinator")

#: Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: a group's regexes are resolved at most this often.
REGEX_BATCH_REFRESH_MIN_INTERVAL_MS = 10_000


def matching(regex: str, topic_names: Iterable[str]) -> frozenset[str]:
    """The topics a regex matches as a whole name (Kafka: RE2/J ``matches``); never internal ones."""
    pattern = topic_pattern(regex)
    return frozenset(name for name in topic_names if name not in INTERNAL_TOPICS and pattern.fullmatch(name))


def on_heartbeat(group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                 topic_names: Mapping[str, int], now_ms: float, refresh_interval_ms: int,
                 effects: list[Effect]) -> bool:
    """Kafka's maybeUpdateRegularExpressions for ``member`` becoming ``updated`` (before the
    group holds ``updated``); appends the resolution's timer to ``effects`` when one is due.
    Returns whether the group epoch must bump now."""
    old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
    if not (old or new or group.resolved_regexes):
        return False  # a group without regexes (a subscribed regex is resolved or pending)
    counts = group.subscribed_regexes()
    bump = require = False
    if old != new:
        if old:
            bump = True  # the member's own topics change; its old regex's topics go
            if counts.get(old, 0) <= 1:
                group.resolved_regexes.pop(old, None)
            counts[old] = counts.get(old, 0) - 1
        if new:
            if counts.get(new, 0) == 0:
                require = True
            else:
                bump = bump or new in group.resolved_regexes
            counts[new] = counts.get(new, 0) + 1
    regexes = {regex for regex, n in counts.items() if n > 0}
    if not regexes or group.regex_refresh_pending:
        return bump
    last = group.last_regex_refresh_ms()
    if now_ms <= last + REGEX_BATCH_REFRESH_MIN_INTERVAL_MS:
        return bump
    require = (require or regexes != group.resolved_regexes.keys()
               or any(r.topic_names != topic_names.keys() for r in group.resolved_regexes.values())
               or now_ms >= last + refresh_interval_ms)
    if require:
        group.regex_refresh_pending = True
        effects.append(ScheduleTimer(ConsumerTimerKey(REGEX, group.group_id, ""), now_ms))
    return bump


def resolve(group: ConsumerGroup, topic_names: Mapping[str, int], now_ms: float) -> bool:
    """Resolve every regex the group subscribes to against ``topic_names`` (the background
    half); returns whether any resolution changed (then the group epoch must bump)."""
    group.regex_refresh_pending = False
    names = frozenset(topic_names)
    resolved: dict[str, ResolvedRegex] = {}
    changed = False
    for regex in sorted(group.subscribed_regexes()):
        topics = matching(regex, names)
        previous = group.resolved_regexes.get(regex)
        changed = changed or previous is None or previous.topics != topics
        resolved[regex] = ResolvedRegex(topics, names, now_ms)
    if resolved.keys() != group.resolved_regexes.keys():
        changed = True
    group.resolved_regexes = resolved
    if resolved:
        log.info("consumer group %s: resolved regular expressions %s", group.group_id,
                 "; ".join(f"{regex!r} → {len(r.topics)} topic(s)" for regex, r in resolved.items()))
    return changed


def fold_in(group: ConsumerGroup, topic_counts: Mapping[str, int], now_ms: float) -> bool:
    """Resolve, then bump the group epoch if a resolution or the subscribed topics' partition
    counts changed (Kafka's handleRegularExpressionsResult); returns whether it bumped.
    Members see the new epoch at their next heartbeat."""
    changed = resolve(group, topic_counts, now_ms)
    metadata = {t: topic_counts[t] for t in sorted(group.subscribed_topics(topic_counts))}
    if not changed and metadata == group.subscription_metadata:
        return False
    group.group_epoch += 1
    group.subscription_metadata = metadata
    log.info("consumer group %s: group epoch %d after resolving its regular expressions", group.group_id,
             group.group_epoch)
    return True


def resolve_all(groups: Iterable[ConsumerGroup], topic_names: Mapping[str, int], now_ms: float) -> None:
    """A loaded coordinator resolves its groups' regexes again (resolutions are not persisted)."""
    for group in groups:
        resolve(group, topic_names, now_ms)
