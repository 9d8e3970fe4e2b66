"""Security: listeners' security protocols, TLS contexts, SASL mechanisms, principals, and
the authorizer (``authorizer.py``, pure; its ACLs kept by ``acl_store.py``).

Entered from the connection (``trikafka.network``): the processor asks
:func:`trikafka.security.listener.listener_security` what a listener needs (a TLS context,
a SASL authenticator factory) and the connection runs it in its own task. Nothing here
imports the server, the logs or the network: it is fed bytes and settings, and answers bytes.
"""

__all__: list[str] = []
