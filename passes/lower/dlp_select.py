def select_compute(plan):
    return None
