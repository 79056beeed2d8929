"""A Jepsen-style fault suite for a real LedgerMQ cluster (issue 15).

A NameServer and a broker group of three replicas run as processes, each in its own network
namespace on a bridge (``netns``, ``cluster``); producers record every send and its outcome
(``workload``, ``history``) while a seeded nemesis partitions, cuts, kills and pauses replicas
(``nemesis``); after healing, every replica is read directly and a consumer group reads the
topic, and a pure checker judges the history (``checker``). ``runner.run_chaos`` does a whole
run; ``ledgermq chaos run --seed N --duration S`` is its command line (``command``).
"""
