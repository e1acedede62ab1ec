"""Security: who a connection is (authentication) and, later, what it may do.

sasl/ holds SASL authentication (SaslHandshake/SaslAuthenticate, KIP-43/152/368): the
mechanisms PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER, and the per-connection state the
network loop consults before it lets a request through.
"""
