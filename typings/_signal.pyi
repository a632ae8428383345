# The C module behind `signal` (hook_shim imports it to skip `signal`'s enum import); typeshed
# has no stub for it. Only what semo uses, re-exported from `signal`'s stub.
from signal import ITIMER_REAL as ITIMER_REAL
from signal import SIGALRM as SIGALRM
from signal import setitimer as setitimer
from signal import signal as signal
