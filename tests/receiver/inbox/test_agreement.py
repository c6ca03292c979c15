"""The in-memory twin, SQLite (and PostgreSQL when configured) agree on every inbox operation."""

from __future__ import annotations

from hypothesis import settings

from tests.receiver.inbox.agreement import make_agreement_machine
from tests.receiver.inbox.backends import backend_factories

InboxAgreement = make_agreement_machine(backend_factories())
InboxAgreement.TestCase.settings = settings(
    InboxAgreement.TestCase.settings, stateful_step_count=30
)
TestInboxAgreement = InboxAgreement.TestCase
