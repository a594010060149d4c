"""Who may do what: the authorized operations answers report (authorized_ops.py); the
authorizer and its ACLs plug in here."""
