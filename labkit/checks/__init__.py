"""Checks for the lesson and exercise notebooks: each failure says what is wrong and how to fix it.

Every check looks at a real outcome (a server that answers, a model that learned, bytes that shrank, a
checkpoint on disk) and fails with ``CheckFailed`` (an ``AssertionError``) through ``require``. One module
per lesson topic; a notebook calls them as ``checks.<name>``.
"""
from labkit.checks.core import (  # noqa: F401
    CheckFailed, Checklist, accuracy_reached, close_accuracy, learned, pids_gone, processes_stopped, require,
)
from labkit.checks.allreduce import (  # noqa: F401
    READY_BATCHES, async_did_not_wait, copies_identical, link_bytes_near, lockstep_bound_samples_per_s,
    lockstep_limit_samples_per_s, moved_rows_not_table, replicated, sharded_over_ps, sync_waited, updates_per_batch_match,
)
from labkit.checks.cluster_by_hand import (  # noqa: F401
    cluster_trained, servers_serving, tf_configs_valid,
)
from labkit.checks.compression import (  # noqa: F401
    accuracy_within_margin, compression_paid_off, compressor_shrinks, contracts,
    fewer_total_bytes, same_payload, steps_at_least_as_large, within_variance_bound,
)
from labkit.checks.custom_loop import (  # noqa: F401
    arrays_shipped_to_every_task, every_worker_ran, files_route_ships_no_data, free_workers_took_more,
    slots_beside_their_variables, split_into_shards, static_split,
)
from labkit.checks.embeddings import (  # noqa: F401
    allreduce_refused, beats_popularity, bytes_follow_distinct_ids, bytes_near_prediction, held_where_expected,
    hot_share_within, line_predicts, lookup_matches, more_servers_fewer_bytes, spread_is_a_permutation,
    spreading_cooled_the_hot_server, used_own_spread, within_budget, workers_hold_no_rows,
)
from labkit.checks.faults import (  # noqa: F401
    at_least_once, checkpoint_saved, coordinator_resumed, fit_skipped_epochs, killed_during, latest_checkpoint_complete,
    one_recovery_per_failure, recovered, trained_to, worked_after_restart,
)
from labkit.checks.mnist import (  # noqa: F401
    fit_ran_every_input, only_keras3_failed, waited_in_the_strategy, workers_see_different_batches,
)
from labkit.checks.performance import (  # noqa: F401
    beyond_spread, clusters_stopped, dense_traffic_is_model_size, plot_shows, predicted_every_point,
    pulls_and_pushes_are_model_size, relative_spread_is_range_over_median, results_saved, timed_the_cluster,
    timed_every_worker_count,
)
from labkit.checks.staleness import (  # noqa: F401
    claims_after_update, dropped_share_read, filter_rule, dropped_exactly_the_stale, measured_staleness, ssp_waited,
    staleness_aware_won_back, used_own_filter,
)
from labkit.checks.tf_config import (  # noqa: F401
    ALL_INTERFACES, isolated_kernel_unreachable, listens_on_every_interface, received_its_tf_config,
    restarted_in_place, same_cluster_everywhere, task_dead,
)
from labkit.checks.to_cluster import (  # noqa: F401
    kubernetes_names_consistent, runs_with_its_files,
)
from labkit.checks.transformer import (  # noqa: F401
    beats_baseline, lookup_sends_rows,
)
from labkit.checks.welcome import (  # noqa: F401
    keras_2,
)
