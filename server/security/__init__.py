"""Security: who may do what (the authorizer and its ACLs; authentication and quotas join here)."""
