"""One construct per concern; `infra.stack.SquadronStack` composes them."""
