# Ports a pthread program to turquoise's green threads by renaming its calls
# (README, "Green threads from C"): sed -f pthread-to-turq.sed prog.c
s/\bpthread_create\b/turq_create_attr/g
s/\bpthread_join\b/turq_join/g
s/\bpthread_detach\b/turq_detach/g
s/\bpthread_self\b/turq_self/g
s/\bpthread_equal\b/turq_equal/g
s/\bpthread_attr_t\b/turq_attr_t/g
s/\bpthread_attr_init\b/turq_attr_init/g
s/\bpthread_attr_destroy\b/turq_attr_destroy/g
s/\bpthread_attr_setdetachstate\b/turq_attr_setdetachstate/g
s/\bpthread_attr_setstacksize\b/turq_attr_setstacksize/g
s/\bpthread_attr_getstacksize\b/turq_attr_getstacksize/g
s/\bPTHREAD_CREATE_DETACHED\b/TURQ_CREATE_DETACHED/g
s/\bPTHREAD_CREATE_JOINABLE\b/TURQ_CREATE_JOINABLE/g
s/\bPTHREAD_CANCELED\b/TURQ_CANCELED/g
s/\bpthread_cancel\b/turq_cancel/g
s/\bpthread_exit\b/turq_exit/g
s/\bsched_yield\b/turq_yield/g
s/\bpthread_t\b/turq_t/g
# Mutexes and condition variables: same parameters and return values
# (pthread_mutexattr_t and pthread_condattr_t have no counterpart yet, so a
# program that uses them does not compile once ported). sem_* stays as it
# is: turq_sem_* return the error number instead of -1 and errno.
s/\bpthread_mutex_\(t\|init\|lock\|trylock\|timedlock\|unlock\|destroy\)\b/turq_mutex_\1/g
s/\bpthread_cond_\(t\|init\|wait\|timedwait\|signal\|broadcast\|destroy\)\b/turq_cond_\1/g
s/\bPTHREAD_MUTEX_INITIALIZER\b/TURQ_MUTEX_INITIALIZER/g
s/\bPTHREAD_COND_INITIALIZER\b/TURQ_COND_INITIALIZER/g
s|#include <pthread.h>|#include "turquoise.h"|
