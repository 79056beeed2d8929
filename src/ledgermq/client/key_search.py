"""Messages by key, past the 64 a broker answers for one lookup.

A broker answers a key lookup (QUERY_MESSAGE, RocketMQ's ``queryMsgByKey``) with at most 64
messages, the newest of the time range asked (RocketMQ clamps ``maxNum`` to
``maxMsgsNumBatch``, 64, too), so a caller that asks once stops silently at 64 whatever it
wanted. ``newest_by_key`` asks again with the range ending where a full answer ended, for each
broker whose answer was full, until it has enough or nothing new comes. A millisecond that holds
more than a full answer (a producer's batch is stored in one) would bring the same 64 back each
time: it is read whole by store time instead (the tools consumer's pulls, nothing committed),
and the search goes on below it. Used by ``ledgermq admin message --key`` and the console's
Messages page.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ledgermq.client.admin import Admin
    from ledgermq.wire import MessageExt

__all__ = ["KEY_BATCH", "MILLISECOND_READ_MAX", "newest_by_key"]

KEY_BATCH: Final = 64
"""Most messages a broker returns for one key lookup (it clamps ``maxNum`` to 64)."""
MILLISECOND_READ_MAX: Final = 100_000
"""Most messages of the topic read for one millisecond that holds more than a full answer."""


async def newest_by_key(admin: Admin, topic: str, key: str, limit: int) -> list[MessageExt]:
    """Up to ``limit`` messages of ``topic`` whose KEYS or UNIQ_KEY include ``key``, newest
    first, gathered past the 64 a broker returns at once."""
    found: dict[str, MessageExt] = {}
    end_ms = 1 << 62
    while len(found) < limit:
        batch = await admin.query_message(topic, key, max_num=KEY_BATCH, end_ms=end_ms)
        new = [m for m in batch if m.offset_msg_id not in found]
        found.update((m.offset_msg_id, m) for m in new)
        per_broker = Counter(m.store_host for m in batch)
        full = [host for host, count in per_broker.items() if count >= KEY_BATCH]
        if not full:
            break  # every broker gave all it had
        if not new:
            # asking up to millisecond ``end_ms`` brought the same ones back: read it whole
            found.update(
                (m.offset_msg_id, m)
                for m in await admin.messages_between(
                    topic, end_ms, end_ms, max_messages=MILLISECOND_READ_MAX
                )
                if key in m.keys or m.properties.get("UNIQ_KEY") == key
            )
            end_ms -= 1
            continue
        # ask again up to where the latest-ending full answer stopped (inclusive: messages
        # of that millisecond not yet seen come back; the seen ones are dropped above)
        end_ms = max(min(m.store_timestamp for m in batch if m.store_host == h) for h in full)
    ordered = sorted(
        found.values(), key=lambda m: (m.store_timestamp, m.commit_log_offset), reverse=True
    )
    return ordered[:limit]
