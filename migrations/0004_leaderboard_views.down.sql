-- Reverts 0004_leaderboard_views. The views hold no data of their own.
DROP VIEW leaderboard_daily;
DROP VIEW leaderboard_by_turn_limit;
DROP VIEW leaderboard;
DROP VIEW leaderboard_results;
