"""The registry's DynamoDB adapters, one module per port of :mod:`squadron.registry_ports`, all on
one table: :mod:`.keys` (its shape, keys and items) and :mod:`.table` (its plumbing and the
requests several ports write) are what they share; they never import each other.
:class:`squadron.adapters.dynamo_registry.DynamoRegistry` is all of them at once."""
