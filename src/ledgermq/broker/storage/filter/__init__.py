"""Message filters a pull applies on the broker: RocketMQ's SQL92 property selectors.

``sql92_parser`` (text -> tree), ``sql92_eval`` (tree -> predicate over properties),
``selector`` (compiled selectors, cached per text) and ``subscription`` (what a pull or a
CHECK_CLIENT_CONFIG asks for: tag or SQL92, and the broker's answer). Pure: no I/O.
"""

from ledgermq.broker.storage.filter.selector import Sql92Selector, compile_sql92
from ledgermq.broker.storage.filter.sql92_parser import Sql92Error

__all__ = ["Sql92Error", "Sql92Selector", "compile_sql92"]
