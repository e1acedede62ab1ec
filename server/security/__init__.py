"""Security: listeners with security protocols and TLS (listeners.py, tls.py, principal.py),
who a connection is (authentication), what it may do (authorization) and how much of the
broker it may use (quotas).

Kept apart from the network loop so the loop only asks "what protocol is this listener",
"wrap this stream" and "may this request pass"; the rules (Kafka's setting names,
principal mapping) live here. sasl/ holds SASL authentication (SaslHandshake/
SaslAuthenticate, KIP-43/152/368): the mechanisms PLAIN, SCRAM-SHA-256/512 and
OAUTHBEARER, and the per-connection state the network loop consults before it lets a
request through.

quotas.py and client_quotas.py hold client quotas (KIP-13/124/546/219/612): how much of
the broker a user or client id may use.

authorizer.py and acls.py hold authorization: Kafka's AclAuthorizer rules over ACLs
(CreateAcls/DescribeAcls/DeleteAcls), asked through RequestContext.authorize.
"""
