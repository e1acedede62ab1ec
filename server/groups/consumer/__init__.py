"""KIP-848 consumer groups (group.protocol=consumer): beside the classic coordinator in server/groups/coordinator.py"""
