"""DQN-style Q-learning with a target network and ``stop_gradient``.

A chain of N states: action 1 moves right, action 0 moves left; moving right from
the last state pays 1 and ends the episode. With discount gamma the optimal values
are Q*(s, right) = gamma^(N-1-s) and Q*(s, left) = gamma * V*(max(s-1, 0)).

The online network Q is trained on the TD loss

    mean (Q(s, a) - stop_gradient(r + gamma * (1 - done) * max_a' Q_target(s', a')))^2

over every transition of the chain (an exhaustive replay buffer). The target
network is a copy of Q refreshed every few steps with ``set_weights(get_weights())``;
``stop_gradient`` keeps the tape from differentiating through the target (its
variables get no gradient at all).

Run: python examples/target_network.py [--steps N]
"""

import argparse

import numpy as np

import jittape as jt

N_STATES = 6
GAMMA = 0.9


def optimal_q():
    v = np.array([GAMMA ** (N_STATES - 1 - s) for s in range(N_STATES)])
    q = np.zeros((N_STATES, 2))
    for s in range(N_STATES):
        q[s, 1] = v[s]
        q[s, 0] = GAMMA * v[max(s - 1, 0)]
    return q


def transitions():
    """Every (s, a, r, s', done) of the chain, states one-hot."""
    s, a, r, s2, done = [], [], [], [], []
    for state in range(N_STATES):
        for action in (0, 1):
            if action == 1:
                nxt = min(state + 1, N_STATES - 1)
                end = state == N_STATES - 1
            else:
                nxt, end = max(state - 1, 0), False
            s.append(state)
            a.append(action)
            r.append(1.0 if end else 0.0)
            s2.append(nxt)
            done.append(1.0 if end else 0.0)
    eye = np.eye(N_STATES, dtype=np.float32)
    return (eye[s], np.array(a), np.array(r, np.float32), eye[s2], np.array(done, np.float32))


def make_q_network():
    return jt.Sequential([
        jt.layers.Dense(32, activation="relu", input_shape=(N_STATES,)),
        jt.layers.Dense(2),
    ])


def td_loss(q_net, target_net, batch):
    s, a, r, s2, done = batch
    q_sa = jt.reduce_sum(q_net(s) * jt.one_hot(a, 2), axis=1)
    next_value = jt.reduce_max(target_net(s2), axis=1)
    target = jt.stop_gradient(r + GAMMA * (1.0 - done) * next_value)
    return jt.reduce_mean(jt.square(q_sa - target))


def main(steps=600, target_every=25, seed=0, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    jt.random.set_seed(seed)
    q_net, target_net = make_q_network(), make_q_network()
    target_net.set_weights(q_net.get_weights())
    optimizer = jt.optimizers.Adam(1e-2)
    batch = transitions()
    all_states = np.eye(N_STATES, dtype=np.float32)
    q_star = optimal_q()

    # stop_gradient: the target network's weights are not on any gradient path
    with jt.GradientTape() as tape:
        loss = td_loss(q_net, target_net, batch)
    target_grads = tape.gradient(loss, target_net.trainable_variables)
    say(f"gradients reaching the target network: {target_grads}")

    first_error = float(np.abs(q_net(all_states).numpy() - q_star).max())
    losses = []
    for step in range(1, steps + 1):
        with jt.GradientTape() as tape:
            loss = td_loss(q_net, target_net, batch)
        grads = tape.gradient(loss, q_net.trainable_variables)
        optimizer.apply_gradients(zip(grads, q_net.trainable_variables))
        losses.append(float(loss))
        if step % target_every == 0:
            target_net.set_weights(q_net.get_weights())
        if step % 150 == 0 or step == steps:
            err = np.abs(q_net(all_states).numpy() - q_star).max()
            say(f"step {step:4d}  TD loss {float(loss):.5f}  max |Q - Q*| {err:.4f}")
    q = q_net(all_states).numpy()
    error = float(np.abs(q - q_star).max())
    policy = q.argmax(axis=1)
    say("greedy policy (1 = right):", policy.tolist())
    return {"target_grads": target_grads, "losses": losses, "first_error": first_error,
            "error": error, "policy": policy}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    main(steps=p.parse_args().steps)
