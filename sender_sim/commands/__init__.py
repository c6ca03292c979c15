"""The sender simulator's commands, one module per command name: ``hookproof send``
(:mod:`.send`), ``hookproof dlq`` (:mod:`.dlq`) and ``hookproof explain`` (:mod:`.explain`), with
what they share in :mod:`.support` (parsing, the store, the session clock, running deliveries),
:mod:`.reports` (JSON documents and verdicts) and :mod:`.options` (their own options). The sandbox
command is :mod:`sender_sim.sandbox.cli`; options every package shares are
:mod:`receiver.commands.options`.
"""
