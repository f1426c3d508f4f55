"""The prices in the LiteLLM proxy's config (US dollars per input and output token), as a
deployment sets its own: a module of its own, so that tests import it by a name no other
folder's ``conftest`` shares."""

PRICES = {"lite-chat": (1e-6, 2e-6), "lite-reasoner": (3e-6, 4e-6)}
