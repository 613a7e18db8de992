# examples/readme/readme.py: kill it at any moment and run it again
import numpy as np
import resurgo

steps = 1000
u = np.zeros(1 << 20)


def solve(u, step):  # one time step of the application
    u += step        # in place: `u = u + step` would leave the protected array behind


with resurgo.Store("heat") as store:
    store.protect("field", u)
    try:
        step = store.restart()              # the newest intact version: the steps done
        print(f"resumed after step {step}")
    except resurgo.NotFoundError:           # none yet: start at step 0
        step = 0
    while step < steps:
        step += 1
        solve(u, step)
        if step % 100 == 0:
            store.checkpoint(step)          # blocks only for the copy
    store.wait(level=resurgo.L2)            # every pending version, durable on local disk
print(f"{step} steps: u[0] = {u[0]:.0f}")
