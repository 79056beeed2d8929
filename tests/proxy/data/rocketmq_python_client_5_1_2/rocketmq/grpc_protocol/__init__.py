# Licensed to the Apache Software Foundation (ASF) under one or more
# contributor license agreements.  See the NOTICE file distributed with
# this work for additional information regarding copyright ownership.
# The ASF licenses this file to You under the Apache License, Version 2.0
# (the "License"); you may not use this file except in compliance with
# the License.  You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

from .definition_pb2 import (Address, AddressScheme, Broker,  # noqa
                             ClientType, Code, DigestType, Encoding, Endpoints, # noqa
                             FilterType, Language, LiteSubscriptionAction, MessageType, Metric, # noqa
                             Permission, Publishing, Resource, Settings, # noqa
                             Status, Subscription, TransactionResolution, # noqa
                             TransactionSource) # noqa
from .service_pb2 import (AckMessageEntry, AckMessageRequest,  # noqa
                          ChangeInvisibleDurationRequest, # noqa
                          EndTransactionRequest, HeartbeatRequest, # noqa
                          NotifyClientTerminationRequest, QueryRouteRequest, # noqa
                          ReceiveMessageRequest, SendMessageRequest, # noqa
                          SyncLiteSubscriptionRequest, TelemetryCommand, # noqa
                          RecallMessageRequest, QueryAssignmentRequest, # noqa
                          ForwardMessageToDeadLetterQueueRequest) # noqa
from .service_pb2_grpc import MessagingServiceStub

__all__ = [
    "Address", # noqa
    "AddressScheme", # noqa
    "ClientType", # noqa
    "Resource", # noqa
    "Broker", # noqa
    "Code", # noqa
    "DigestType", # noqa
    "Encoding", # noqa
    "Endpoints", # noqa
    "FilterType", # noqa
    "Language", # noqa
    "MessageType", # noqa
    "Metric", # noqa
    "Permission", # noqa
    "Publishing", # noqa
    "Settings", # noqa
    "Status", # noqa
    "Subscription", # noqa
    "TransactionResolution", # noqa
    "TransactionSource", # noqa
    "AckMessageEntry", # noqa
    "AckMessageRequest", # noqa
    "ChangeInvisibleDurationRequest", # noqa
    "EndTransactionRequest", # noqa
    "HeartbeatRequest", # noqa
    "NotifyClientTerminationRequest", # noqa
    "QueryRouteRequest", # noqa
    "ReceiveMessageRequest", # noqa
    "SendMessageRequest", # noqa
    "TelemetryCommand", # noqa
    "RecallMessageRequest", # noqa
    "QueryAssignmentRequest", # noqa
    "SyncLiteSubscriptionRequest", # noqa
    "LiteSubscriptionAction", # noqa
    "ForwardMessageToDeadLetterQueueRequest", # noqa
    "MessagingServiceStub",
]
