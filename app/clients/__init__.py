"""The clients room: who a client is and what each client may take of what all clients share.

* :mod:`.identity`: the one identity (an address folded to what one party controls, with its bearer
  token when tokens are checked) that rate limits, shares, idempotency keys and own motions use;
* :mod:`.addresses`: the address a request comes from (the peer, or behind a trusted proxy the one
  it forwarded) and which peers may name the answers' host;
* :mod:`.ratelimit`: each client's token bucket, one token per request that stores work;
* :mod:`.lookups`: the callback names looked up at submit, one at a time per client (the DNS counter);
* :mod:`.lanes`: the callback lanes a render worker gives each receiver and each client;
* :mod:`.connections`: the connections one client may hold open to a gunicorn worker (its cap).

Each client's shares are :mod:`app.shares` (their table, ``SHARES``). A shared room:
it imports no other room (pure functions and counters; the routes apply them to a request).
"""
from .addresses import forwarded_client, trusted_peer
from .identity import IPV6_PREFIX, client_id, current, digest, fold_address
from .lanes import PER_RECEIVER, Lanes, receiver_of

__all__ = ["IPV6_PREFIX", "PER_RECEIVER", "Lanes", "client_id", "current", "digest", "fold_address",
           "forwarded_client", "receiver_of", "trusted_peer"]
