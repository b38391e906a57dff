"""GitHub: App authentication, a rate-limit-aware REST transport, and the role-enforcing client."""
