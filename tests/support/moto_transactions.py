"""The suite's in-process moto rolls a failed TransactWriteItems back item by item, as the local
stack's moto server does (:func:`squadron.adapters.moto_server.patch_dynamodb`).

moto 5 backs up a table before a transaction by deep-copying it again for every item of the
transaction that names it (``DynamoDBBackend.transact_write_items``): a decision of 100 items
copied the whole registry table 100 times, and the tests of large decisions spent most of their
time there. Even one copy per transaction costs the whole table (the domain events' history lives
in it). The server's patch restores only the items a failed transaction names (with DynamoDB's
requests one at a time, nothing else runs during one), and it used to reach this process only when
a test of the server applied it, so a test's moto depended on what ran before it on its worker.
Now every test's moto is the server's, from the start. What a transaction does and commits is
moto's own code, unchanged.
"""

from __future__ import annotations

from squadron.adapters import moto_server


def install() -> None:
    """From now on in this process (moto's in-process ``mock_aws``)."""
    moto_server.patch_dynamodb()
