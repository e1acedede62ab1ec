"""Security: who a connection is, what it may do, and how much of the broker it may use.

quotas.py and client_quotas.py hold client quotas (KIP-13/124/546/219/612).
"""
