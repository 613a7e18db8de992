# examples/readme/adjoint.py: model and n_steps are the application's
from checkpoint_schedules import Revolve
from resurgo.adjoint import ResurgoStorage, run

# model.state: the NumPy arrays the forward step advances in place;
# model.forward(n0, n1, adj_deps=...) and model.reverse(n1, n0, clear_adj_deps=...)
schedule = Revolve(n_steps, 16)                      # 16 checkpoints in RAM
with ResurgoStorage("shot", model.state) as storage:  # disk_path=... adds DISK
    stats = run(schedule, model, storage, n_steps=n_steps)
