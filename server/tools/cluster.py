"""placeholder"""
def register(sub, parent):
    pass
