"""Transactions (KIP-98, KIP-890): the pure :mod:`.transaction_machine` in the Trio shell
:mod:`.transaction_coordinator`, the state (:mod:`.transaction_state`) and transaction
version 2 (:mod:`.transaction_v2`)."""

__all__: list[str] = []
