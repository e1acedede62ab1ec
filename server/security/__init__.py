"""Security: listeners with security protocols, TLS, and (other modules) SASL, ACLs, quotas.

Kept apart from the network loop so the loop only asks "what protocol is this listener"
and "wrap this stream"; the rules (Kafka's setting names, principal mapping) live here.
"""
